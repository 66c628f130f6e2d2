// The C API's handles and the one place C++ Status becomes an lh_status plus a stored message
// (common_api.cpp). The arguments' conversions are convert.hpp's.
#pragma once

#include <memory>
#include <string>

#include "collective/operation.hpp"
#include "common/mutex.hpp"
#include "common/status.hpp"
#include "master/master.hpp"
#include "peer/peer.hpp"

struct lh_master {
  std::unique_ptr<longhaul::master::Master> impl;
  bool stopped = false;
  mutable longhaul::Mutex mu;
  std::string last_error GUARDED_BY(mu);
};

// A peer (peer/peer.hpp: the runtime, the communicator, the block server and the state sync it
// owns), built by lh_comm_create. lh_comm_destroy frees the peer but never this struct: it stays
// a tombstone (impl null) so that a call on a destroyed handle is reported (check_handle), not
// undefined (longhaul.h, "Closed, unconnected and destroyed communicators").
struct lh_comm {
  uint64_t generation = 0;  // the how-many-th communicator of the process, from 1
  std::unique_ptr<longhaul::peer::Peer> impl;
  mutable longhaul::Mutex mu;
  std::string last_error GUARDED_BY(mu);
};

// One collective operation in flight (any kind: all-reduce, reduce-scatter, all-gather, ...).
struct lh_op {
  std::shared_ptr<longhaul::collective::Operation> impl;
  mutable longhaul::Mutex mu;
  std::string last_error GUARDED_BY(mu);
};

namespace longhaul::capi {

// Records a failure as the thread's last error and returns its code.
lh_status fail(const Status& s);
// fail() with "FUNCTION: NULL argument" (LH_ERR_INVALID_ARGUMENT).
lh_status null_argument(const char* function);
const char* thread_last_error();
// Records `s` on the handle too (when it failed) and returns its code.
template <class Handle>
lh_status finish(Handle* h, const Status& s) {
  if (s.is_ok()) return LH_OK;
  {
    MutexLock lock(h->mu);
    h->last_error = s.to_string();
  }
  return fail(s);
}
// OK for a live communicator; LH_ERR_INVALID_ARGUMENT for NULL; LH_ERR_CLOSED for one that
// lh_comm_destroy has destroyed (a tombstone). Records nothing.
Status handle_status(const lh_comm* comm, const char* function);
// handle_status, then LH_ERR_CLOSED (or the session's failure) unless the communicator may
// communicate: admitted and not left (peer::Peer::usable). Records nothing.
Status open_status(const lh_comm* comm, const char* function);
// handle_status / open_status as an lh_status, a failure recorded on the thread and the handle.
lh_status check_handle(lh_comm* comm, const char* function);
lh_status check_open(lh_comm* comm, const char* function);
// Hands a started operation to the caller as a new lh_op (or its failure to start).
template <class Op>
lh_status hand_out(lh_comm* comm, Result<std::shared_ptr<Op>> started, lh_op** out) {
  if (!started) return finish(comm, started.status());
  *out = new lh_op{std::move(*started), {}, {}};
  return LH_OK;
}
// Waits for, reports and frees an operation: the blocking form of every *_async call (op_api.cpp).
lh_status wait_and_destroy(lh_comm* comm, lh_op* op, lh_op_info* info);

// "" for NULL.
inline std::string str(const char* s) {
  return s ? s : "";
}

}  // namespace longhaul::capi
