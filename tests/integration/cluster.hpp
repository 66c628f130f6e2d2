// A longhaul-master daemon and test_peer processes on loopback, for the integration tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process.hpp"

namespace longhaul::testing {

// One "EPOCH ..." line of test_peer.
struct EpochLine {
  uint64_t epoch = 0;
  int64_t world = 0, groups = 0, group_world = 0, rank = 0, aborts = 0;
  std::vector<uint64_t> ring;
};
std::optional<EpochLine> parse_epoch_line(const std::string& line);

// A self-signed certificate (CN=localhost) and its key, written to dir/cert.pem and dir/key.pem
// with openssl; the failure if openssl could not make them.
struct TestCertificate {
  std::string cert, key;
};
::testing::AssertionResult make_test_certificate(const TempDir& dir, TestCertificate* out);

class Cluster {
 public:
  // Starts the daemon on 127.0.0.1:0 with `master_args` added, and waits for its port.
  explicit Cluster(std::vector<std::string> master_args = {});
  ~Cluster();

  std::string master_address() const { return "127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  Child& master() { return *master_; }
  const TempDir& dir() const { return dir_; }

  // Kills the master with SIGKILL and starts a new one on the same port with the same arguments
  // (a journal among them is the same file); waits until it listens. The failure if it did not.
  ::testing::AssertionResult restart_master();

  // Starts a test_peer connecting to this master (extra args appended).
  Child& add_peer(std::vector<std::string> args = {});
  // Waits for the peer's "ID" line; 0 on failure.
  uint64_t peer_id(Child& peer, std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Waits until every peer in `peers` reports the same epoch with `world` peers, the same ring per
  // group, and each group's ring holds exactly that group's peers of `peers`.
  ::testing::AssertionResult wait_agreement(
      const std::vector<Child*>& peers, int64_t world,
      std::chrono::milliseconds timeout = std::chrono::seconds(60));

 private:
  // Starts the daemon listening on `listen` and waits for its port file.
  ::testing::AssertionResult start_master(const std::string& listen);

  TempDir dir_;
  std::vector<std::string> master_args_;
  int master_starts_ = 0;
  std::unique_ptr<Child> master_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<Child>> peers_;
  std::vector<std::vector<std::string>> peer_args_;
};

}  // namespace longhaul::testing
