// longhaul-churn's node bookkeeping (--nodes): hashes are compared per rail, and a rank ending
// with its node evicted (exit status 4) is expected only when its node was disrupted.
#include <gtest/gtest.h>

#include "peer_command.hpp"
#include "run_monitor.hpp"

namespace longhaul_churn {
namespace {

std::string step(uint64_t rev, const std::string& hash) {
  return "STEP step=" + std::to_string(rev - 1) + " rev=" + std::to_string(rev) + " hash=" + hash +
         " world=2 epoch=2 id=1 ar_ms=1 sync_ms=1";
}

class ChurnNodesTest : public ::testing::Test {
 protected:
  RunMonitor m{MonitorLimits{1000, 5000, 3000}};
  void start(const std::string& rank, uint32_t rail) {
    m.on_spawn(rank, 0, rail, /*in_node=*/true);
    m.on_line(rank, "JOINED id=1 epoch=2 world=2", 0);
  }
};

TEST_F(ChurnNodesTest, EachRailHasItsOwnRevisions) {
  start("n1.r0", 0);
  start("n1.r1", 1);
  start("n2.r0", 0);
  m.on_line("n1.r0", step(5, "aaaa"), 1);
  m.on_line("n1.r1", step(5, "bbbb"), 1);  // another rail: another state
  m.on_line("n2.r0", step(5, "aaaa"), 1);
  EXPECT_TRUE(m.violations().empty());
  m.on_line("n2.r0", step(6, "cccc"), 2);
  m.on_line("n1.r0", step(6, "dddd"), 2);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("rail 0"), std::string::npos) << m.violations()[0];
}

TEST_F(ChurnNodesTest, ANodeEvictionIsExpectedOnlyAfterItsNodeWasDisrupted) {
  start("n1.r0", 0);
  start("n1.r1", 1);
  start("n2.r0", 0);
  m.on_node_disrupted("n1.r1");
  m.on_kill("n1.r0", 10);
  m.on_exit("n1.r0", -1, 9, 11);
  m.on_exit("n1.r1", 4, 0, 12);
  EXPECT_TRUE(m.violations().empty());
  EXPECT_EQ(m.summary().node_evictions, 1u);
  m.on_exit("n2.r0", 4, 0, 13);  // nothing happened to node n2
  EXPECT_EQ(m.violations().size(), 1u);
}

// A rank SIGKILLed just as its node is evicted (another rank of it died first) may exit on the
// eviction before the signal lands; a SIGKILLed rank of an undisturbed node may not.
TEST_F(ChurnNodesTest, AKilledRankOfAnEvictedNodeMayExitOnTheEvictionFirst) {
  start("n1.r0", 0);
  start("n1.r1", 1);
  start("n2.r0", 0);
  m.on_node_disrupted("n1.r1");
  m.on_kill("n1.r0", 10);
  m.on_kill("n1.r1", 10);
  m.on_exit("n1.r0", -1, 9, 11);
  m.on_exit("n1.r1", 4, 0, 11);
  EXPECT_TRUE(m.violations().empty());
  m.on_kill("n2.r0", 12);
  m.on_exit("n2.r0", 4, 0, 13);
  EXPECT_EQ(m.violations().size(), 1u);
}

TEST(ChurnNodesCommand, ARankNamesItsNodeAndRail) {
  Flags f;
  f.nodes = 4;
  f.rails = 2;
  const auto argv =
      peer_command(f, PeerLaunch{"/bin/longhaul-peer", 7, 0, 0, false, "", "n3", 1, {}});
  auto value = [&](const std::string& flag) {
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == flag) return argv[i + 1];
    return std::string("absent");
  };
  EXPECT_EQ(value("--node"), "n3");
  EXPECT_EQ(value("--rail"), "1");
  EXPECT_EQ(value("--rails"), "2");
}

}  // namespace
}  // namespace longhaul_churn
