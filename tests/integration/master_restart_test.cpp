// The master survives a restart (issue 27), with real processes: the master daemon is SIGKILLed
// mid-run and started again on the same address. Peers keep their epoch and links, their
// operations in flight fail retryably, they reconnect and rejoin, the restarted master re-forms
// the rings in a newer epoch, and the next operations succeed bit-identically everywhere; no peer
// exits. Newcomers after the restart get ids above every earlier one (the journal), and a corrupt
// journal is reported and replaced without stopping the master. (The sync engine through two
// restarts: sync_engine_test.cpp; nodes of two rails: node_test.cpp.)
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>

#include "allreduce_steps.hpp"
#include "cluster.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> journal_args(const TempDir& dir) {
  return {"--journal", dir.path() + "/master.journal"};
}

class MasterRestart : public ::testing::TestWithParam<bool> {
 protected:
  std::string dump(const std::vector<std::unique_ptr<Child>>& peers) {
    std::string s;
    for (size_t i = 0; i < peers.size(); ++i) {
      s += "---- peer " + std::to_string(i) + " (last lines) ----\n";
      const auto lines = peers[i]->lines();
      for (size_t k = lines.size() > 15 ? lines.size() - 15 : 0; k < lines.size(); ++k)
        s += lines[k] + "\n";
      s += "---- stderr ----\n" + peers[i]->stderr_text() + "\n";
    }
    return s;
  }
};

// Waits until every peer has completed a step in an epoch above `epoch`, `more` steps past the
// one it was at when called.
::testing::AssertionResult steps_after(const std::vector<std::unique_ptr<Child>>& peers,
                                       uint64_t epoch, long more, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<long> from;
  for (const auto& p : peers) {
    const auto steps = steps_of(*p);
    from.push_back(steps.empty() ? 0 : steps.rbegin()->first);
  }
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (size_t i = 0; i < peers.size() && all; ++i) {
      const auto steps = steps_of(*peers[i]);
      all = !steps.empty() && steps.rbegin()->first >= from[i] + more &&
            steps.rbegin()->second.epoch > epoch;
    }
    if (all) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(20ms);
  }
  return ::testing::AssertionFailure() << "the peers did not go on in an epoch above " << epoch;
}

TEST_P(MasterRestart, AllReducesFailRetryablyThenGoOnBitIdenticalAfterAKill9) {
  const bool batch = GetParam();
  constexpr int kPeers = 4;
  TempDir state;
  Cluster cluster(journal_args(state));
  ASSERT_NE(cluster.port(), 0);
  std::vector<std::unique_ptr<Child>> peers;
  for (int i = 0; i < kPeers; ++i) {
    std::vector<std::string> argv = {LONGHAUL_ALLREDUCE_PEER_BIN,
                                     "--master",
                                     cluster.master_address(),
                                     "--world",
                                     std::to_string(kPeers),
                                     "--steps",
                                     "1000000",
                                     "--mib",
                                     "1"};
    if (batch) argv.push_back("--batch");
    peers.push_back(std::make_unique<Child>(
        argv, cluster.dir().path() + "/arpeer" + std::to_string(i) + ".log"));
  }
  ASSERT_TRUE(steps_after(peers, 0, 5, 60s)) << dump(peers);
  uint64_t before = 0;
  for (const auto& p : peers) before = std::max(before, steps_of(*p).rbegin()->second.epoch);

  ASSERT_TRUE(cluster.restart_master());
  ASSERT_TRUE(steps_after(peers, before, 10, 60s)) << dump(peers) << cluster.master().stderr_text();
  for (auto& p : peers) EXPECT_TRUE(p->running()) << "no peer exits\n" << dump(peers);
  for (auto& p : peers) p->close_stdin();
  for (auto& p : peers) EXPECT_EQ(p->wait_exit(60s), 0) << dump(peers);

  // Every step any two peers completed is bit-identical and exact; failures were retryable.
  const auto reference = steps_of(*peers[0]);
  for (const auto& p : peers) {
    for (const auto& [step, line] : steps_of(*p)) {
      EXPECT_EQ(line.maxerr, 0.0) << "step " << step;
      auto it = reference.find(step);
      if (it != reference.end()) {
        EXPECT_EQ(line.hash, it->second.hash) << "step " << step;
      }
    }
    for (const auto& l : p->lines()) {
      if (l.rfind("fail ", 0) != 0) continue;
      EXPECT_TRUE(l.find("LH_ERR_ABORTED") != std::string::npos ||
                  l.find("LH_ERR_PEER_LOST") != std::string::npos)
          << l;
    }
  }
  const std::string log = cluster.master().stderr_text();
  EXPECT_NE(log.find("restarting a run"), std::string::npos) << log;
  EXPECT_NE(log.find("recovery done: 4 of 4"), std::string::npos) << log;
}

INSTANTIATE_TEST_SUITE_P(SingleAndBatch, MasterRestart, ::testing::Bool(),
                         [](const auto& param_info) {
                           return param_info.param ? "Batch" : "Single";
                         });

TEST(MasterRestartMembership, MembersRejoinAndNewcomersGetIdsAboveEveryEarlierOne) {
  TempDir state;
  Cluster cluster(journal_args(state));
  ASSERT_NE(cluster.port(), 0);
  std::vector<Child*> peers;
  uint64_t highest = 0;
  for (int i = 0; i < 3; ++i) {
    peers.push_back(&cluster.add_peer());
    highest = std::max(highest, cluster.peer_id(*peers.back()));
  }
  ASSERT_TRUE(cluster.wait_agreement(peers, 3));
  const uint64_t before = parse_epoch_line(peers[0]->last_line("EPOCH "))->epoch;

  ASSERT_TRUE(cluster.restart_master());
  // Every peer enters an epoch newer than any before the restart, and they agree on it.
  for (Child* p : peers)
    ASSERT_TRUE(p->wait_line(
        [before](const std::string& l) {
          auto e = parse_epoch_line(l);
          return e && e->epoch > before;
        },
        30s))
        << p->stderr_text();
  ASSERT_TRUE(cluster.wait_agreement(peers, 3));
  for (Child* p : peers) EXPECT_TRUE(p->running()) << p->stderr_text();

  Child& newcomer = cluster.add_peer();
  EXPECT_GT(cluster.peer_id(newcomer), highest) << "ids are never reused across restarts";
  peers.push_back(&newcomer);
  EXPECT_TRUE(cluster.wait_agreement(peers, 4)) << cluster.master().stderr_text();
}

TEST(MasterRestartMembership, ACorruptJournalIsReportedAndTheMasterStartsSafely) {
  TempDir state;
  const std::string journal = state.path() + "/master.journal";
  std::ofstream(journal) << "longhaul-master-journal 1 last_id=12 last_ep";  // truncated
  Cluster cluster(journal_args(state));
  ASSERT_NE(cluster.port(), 0);
  std::vector<Child*> peers{&cluster.add_peer(), &cluster.add_peer()};
  EXPECT_TRUE(cluster.wait_agreement(peers, 2)) << cluster.master().stderr_text();
  const std::string log = cluster.master().stderr_text();
  EXPECT_NE(log.find("is unreadable (the line is truncated"), std::string::npos) << log;
  EXPECT_TRUE(cluster.master().running());
}

}  // namespace
}  // namespace longhaul::testing
