// Preloaded into a longhaul-peer (LD_PRELOAD): every abort callback it registers runs
// LH_TEST_ABORT_CALLBACK_DELAY_MS (default 500) late, as on a library thread the scheduler left
// waiting while the failed call's thread ran on. node_test.cpp checks that the evicted rank's
// EVICTED line survives it.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "longhaul/longhaul.h"

namespace {

lh_abort_callback g_callback = nullptr;

void late(void* user_data, uint64_t epoch, lh_status status, const char* reason) {
  const char* ms = std::getenv("LH_TEST_ABORT_CALLBACK_DELAY_MS");
  std::this_thread::sleep_for(std::chrono::milliseconds(ms ? std::atoi(ms) : 500));
  g_callback(user_data, epoch, status, reason);
}

}  // namespace

extern "C" lh_status lh_comm_set_abort_callback(lh_comm* comm, lh_abort_callback callback,
                                                void* user_data) {
  using Real = lh_status (*)(lh_comm*, lh_abort_callback, void*);
  const auto real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "lh_comm_set_abort_callback"));
  if (!real) return LH_ERR_INTERNAL;
  g_callback = callback;
  return real(comm, callback ? late : nullptr, user_data);
}
