// A remote process that dies or leaves mid-transfer gives a typed error at this end within 1 s.
#include <gtest/gtest.h>

#include "../../../tools/longhaul-linkperf/linkperf_protocol.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace longhaul::net {
namespace {

using runtime::IoRuntime;

using longhaul::testing::Child;
using longhaul::testing::TempDir;
using testing::Done;

// Large enough to be mid-transfer 20 ms in, small enough that the remote fills its buffer (on an
// I/O thread, not reading) well inside TCP_USER_TIMEOUT (10 s) even in a sanitizer build.
constexpr size_t kBytes = 64u << 20;

struct RemotePeer {
  TempDir dir;
  Child child{
      {LINKPERF_PATH, "server", "--listen", "127.0.0.1:0", "--port-file", dir.path() + "/port"},
      dir.path() + "/stderr"};
  int port = longhaul::testing::read_port_file(dir.path() + "/port");
};

// Runs transfers in the given direction until the link fails; `kill` is applied once the second
// transfer is under way (the first makes the remote allocate and fill its buffer, which
// takes seconds on a loaded machine and would be counted as shutdown time). Returns the time from
// the kill to the failure of the pending op.
std::chrono::milliseconds time_to_failure(bool we_send, int kill_signal, Status* failure) {
  RemotePeer remote;
  EXPECT_GT(remote.port, 0) << remote.child.stderr_text();
  IoRuntime io(2);
  auto link = connect_link(io, "127.0.0.1", static_cast<uint16_t>(remote.port), 4, {});
  EXPECT_TRUE(link.is_ok()) << link.status().to_string();
  if (!link) return std::chrono::hours(1);
  (*link)->start();
  std::vector<std::byte> buffer(kBytes, std::byte{1});
  std::chrono::steady_clock::time_point killed_at;
  for (uint64_t op = 1;; ++op) {
    Done done;
    if (we_send) {
      (*link)->send_control(linkperf::encode({linkperf::Command::kReceive, op, kBytes}));
      (*link)->send(op, buffer, done.callback());
    } else {
      (*link)->recv(op, buffer, done.callback());
      (*link)->send_control(linkperf::encode({linkperf::Command::kSend, op, kBytes}));
    }
    if (op == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // mid-transfer
      killed_at = std::chrono::steady_clock::now();
      remote.child.kill(kill_signal);
    }
    // Generous: a sanitizer build on a loaded machine moves 256 MiB in seconds, not milliseconds.
    Status s = done.wait(std::chrono::seconds(60));
    if (!s) {
      *failure = s;
      (*link)->close();
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - killed_at);
    }
    if (op > 100) break;
  }
  (*link)->close();
  return std::chrono::hours(1);
}

TEST(PeerDeath, ReceiverKilledMidTransferFailsTheSenderWithinOneSecond) {
  Status failure;
  auto elapsed = time_to_failure(/*we_send=*/true, SIGKILL, &failure);
  EXPECT_EQ(failure.code(), LH_ERR_PEER_LOST) << failure.to_string();
  EXPECT_LT(elapsed, std::chrono::seconds(1)) << elapsed.count() << " ms";
}

TEST(PeerDeath, SenderKilledMidTransferFailsTheReceiverWithinOneSecond) {
  Status failure;
  auto elapsed = time_to_failure(/*we_send=*/false, SIGKILL, &failure);
  EXPECT_EQ(failure.code(), LH_ERR_PEER_LOST) << failure.to_string();
  EXPECT_LT(elapsed, std::chrono::seconds(1)) << elapsed.count() << " ms";
}

// The time measured here includes the remote process handling SIGTERM and closing its links; the
// 1 s bound from the close itself is Link.LocalCloseFailsPendingOpsAtBothEnds.
TEST(PeerDeath, PeerShuttingDownMidTransferFailsTheOpPromptly) {
  Status failure;
  auto elapsed = time_to_failure(/*we_send=*/false, SIGTERM, &failure);
  EXPECT_EQ(failure.code(), LH_ERR_PEER_LOST) << failure.to_string();
  EXPECT_LT(elapsed, std::chrono::seconds(2)) << elapsed.count() << " ms";
}

}  // namespace
}  // namespace longhaul::net
