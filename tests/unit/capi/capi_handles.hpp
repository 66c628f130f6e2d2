// What the C API tests share: owning pointers for the library's handles, and a master on
// loopback (an ephemeral port, running).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

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

// How a test's communicator joins the master (the library's defaults where a field is 0).
struct CommSettings {
  uint32_t min_peers = 0;
  uint32_t connect_timeout_ms = 20000;
  bool full_mesh = false;
  uint32_t connections_per_link = 0;  // 0: the library's default
  uint32_t link_upload_mbit = 0;
  const char* secret = nullptr;
};

// A communicator on 127.0.0.1 (an ephemeral port) joined to `master`. A failure fails the calling
// test and returns NULL.
inline CommPtr connect_to_master(lh_master* master, const CommSettings& s = {}) {
  uint16_t port = 0;
  EXPECT_EQ(lh_master_port(master, &port), LH_OK);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = address.c_str();
  o.listen_address = "127.0.0.1:0";
  o.min_peers = s.min_peers;
  o.connect_timeout_ms = s.connect_timeout_ms;
  o.full_mesh = s.full_mesh ? 1 : 0;
  if (s.connections_per_link != 0) o.connections_per_link = s.connections_per_link;
  if (s.link_upload_mbit != 0) o.link_upload_mbit = s.link_upload_mbit;
  o.secret = s.secret;
  lh_comm* c = nullptr;
  EXPECT_EQ(lh_comm_create(&o, &c), LH_OK) << lh_last_error();
  return CommPtr(c);
}

}  // namespace longhaul::capi_test
