// The C API's handles and the one place C++ Status becomes an lh_status plus a stored message.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/status.hpp"
#include "master/master.hpp"
#include "peer/communicator.hpp"

struct lh_master {
  std::unique_ptr<longhaul::master::Master> impl;
  bool stopped = false;
  mutable std::mutex mu;
  std::string last_error;
};

struct lh_comm {
  std::unique_ptr<longhaul::peer::Communicator> impl;
  mutable std::mutex mu;
  std::string last_error;
};

namespace longhaul::capi {

// Records a failure as the thread's last error and returns its code.
lh_status fail(const Status& s);
const char* thread_last_error();
// Records `s` on the handle too (when it failed) and returns its code.
template <class Handle>
lh_status finish(Handle* h, const Status& s) {
  if (s.is_ok()) return LH_OK;
  {
    std::lock_guard lock(h->mu);
    h->last_error = s.to_string();
  }
  return fail(s);
}
// "" for NULL.
inline std::string str(const char* s) {
  return s ? s : "";
}

}  // namespace longhaul::capi
