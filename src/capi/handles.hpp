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
// owns), built by lh_comm_create.
struct lh_comm {
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
