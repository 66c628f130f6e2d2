// What the C API tests share: owning pointers for the library's handles, and a master on
// loopback (an ephemeral port, running).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include <longhaul/longhaul.h>

namespace longhaul::capi_test {

struct MasterDeleter {
  void operator()(lh_master* m) const { lh_master_destroy(m); }
};
struct CommDeleter {
  void operator()(lh_comm* c) const { lh_comm_destroy(c); }
};
using MasterPtr = std::unique_ptr<lh_master, MasterDeleter>;
using CommPtr = std::unique_ptr<lh_comm, CommDeleter>;

// A running master on 127.0.0.1 (an ephemeral port); `secret` may be NULL. A failure fails the
// calling test (and returns what was made, possibly NULL).
inline MasterPtr start_loopback_master(const char* secret = nullptr) {
  lh_master_options o;
  lh_master_options_init(&o);
  o.listen_address = "127.0.0.1:0";
  o.secret = secret;
  lh_master* m = nullptr;
  EXPECT_EQ(lh_master_create(&o, &m), LH_OK) << lh_last_error();
  if (m) {
    EXPECT_EQ(lh_master_run(m), LH_OK);
  }
  return MasterPtr(m);
}

}  // namespace longhaul::capi_test
