// longhaul-churn's bookkeeping (tools/longhaul-churn/run_monitor.hpp) driven with peer lines: the
// checks that make a soak fail must fire on exactly the situations they name.
#include "run_monitor.hpp"

#include <gtest/gtest.h>

namespace longhaul_churn {
namespace {

std::string step(uint64_t rev, const std::string& hash, int64_t epoch) {
  return "STEP step=" + std::to_string(rev - 1) + " rev=" + std::to_string(rev) + " hash=" + hash +
         " world=3 epoch=" + std::to_string(epoch) + " id=1 ar_ms=1 sync_ms=1";
}

class RunMonitorTest : public ::testing::Test {
 protected:
  RunMonitor m{MonitorLimits{1000, 5000, 3000}};
  void start(const std::string& peer, double now, int64_t epoch = 1) {
    m.on_spawn(peer, now);
    m.on_line(peer, "JOINED id=1 epoch=" + std::to_string(epoch) + " world=2", now);
  }
};

TEST(ParseFields, KeyValuesAndQuotedValues) {
  auto f = parse_fields("RETRY step=4 phase=sync status=LH_ERR_ABORTED message=\"a b=c\" x=1");
  EXPECT_EQ(f["step"], "4");
  EXPECT_EQ(f["phase"], "sync");
  EXPECT_EQ(f["message"], "a b=c");
  EXPECT_EQ(f["x"], "1");
}

TEST_F(RunMonitorTest, SameRevisionSameHashIsFineDifferentHashIsADivergence) {
  start("p1", 0);
  start("p2", 0);
  m.on_line("p1", step(5, "aaaa", 2), 10);
  m.on_line("p2", step(5, "aaaa", 2), 11);
  EXPECT_TRUE(m.violations().empty());
  m.on_line("p2", step(6, "bbbb", 2), 12);
  m.on_line("p1", step(6, "cccc", 2), 13);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("revision 6"), std::string::npos);
  EXPECT_NE(m.violations()[0].find("p1"), std::string::npos);
  EXPECT_NE(m.violations()[0].find("p2"), std::string::npos);
  EXPECT_EQ(m.summary().hashes_compared, 2u);
}

TEST_F(RunMonitorTest, NoStepForLongerThanTheBoundIsAHangButAStopIsNot) {
  start("p1", 0);
  start("p2", 0);
  m.on_line("p1", step(1, "aa", 1), 100);
  m.on_line("p2", step(1, "aa", 1), 100);
  m.on_stop("p2", 200);
  m.check_progress(900);
  EXPECT_TRUE(m.violations().empty());
  m.on_line("p1", step(2, "bb", 1), 1000);
  m.check_progress(2500);  // p1 silent 1.5 s; p2 stopped all along
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("p1"), std::string::npos);
  m.on_cont("p2", 2600);
  m.check_progress(3000);  // the stop does not count against p2
  EXPECT_EQ(m.violations().size(), 1u);
}

TEST_F(RunMonitorTest, ExitsWeCausedAreFineOthersAreCrashes) {
  for (const char* p : {"p1", "p2", "p3", "p4"}) start(p, 0);
  m.on_kill("p1", 10);
  m.on_exit("p1", -1, 9, 11);
  m.on_term("p2", 10);
  m.on_exit("p2", 0, 0, 12);
  EXPECT_TRUE(m.violations().empty());
  m.on_term("p3", 10);
  m.on_exit("p3", 1, 0, 12);  // a graceful leave that failed
  m.on_exit("p4", 1, 0, 13);  // nobody touched it
  ASSERT_EQ(m.violations().size(), 2u);
  EXPECT_NE(m.violations()[0].find("p3"), std::string::npos);
  EXPECT_NE(m.violations()[1].find("p4 "), std::string::npos);
  EXPECT_NE(m.violations()[1].find("crashed"), std::string::npos);
}

TEST_F(RunMonitorTest, RecoveryIsTheKillToASurvivorsStepInALaterEpoch) {
  start("p1", 0, 3);
  start("p2", 0, 3);
  start("p3", 0, 3);
  m.on_line("p1", step(1, "aa", 3), 50);
  m.on_kill("p3", 100);
  m.on_line("p2", step(2, "bb", 3), 120);  // still the old epoch: not recovered
  m.on_line("p1", step(3, "cc", 4), 350);
  auto s = m.summary();
  ASSERT_EQ(s.recoveries_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(s.recoveries_ms[0], 250);
  EXPECT_EQ(s.unrecovered, 0u);
  EXPECT_EQ(s.kills, 1u);
}

std::string theta(uint64_t step, const std::string& hash, int64_t world, int64_t epoch = 2) {
  return "THETA step=" + std::to_string(step) + " hash=" + hash +
         " world=" + std::to_string(world) + " epoch=" + std::to_string(epoch);
}

// longhaul-train --theta-every: peers reporting one step with different theta_g hashes diverged.
TEST_F(RunMonitorTest, TrainPeersWithDifferentThetaHashesAtOneStepHaveDiverged) {
  start("p1", 0);
  start("p2", 0);
  m.on_line("p1", theta(20, "00aa", 2), 10);
  m.on_line("p2", theta(20, "00aa", 2), 11);
  m.on_line("p2", theta(21, "00bb", 2), 12);
  EXPECT_TRUE(m.violations().empty());
  m.on_line("p1", theta(21, "00cc", 2), 13);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("theta_g divergence after step 21"), std::string::npos);
  EXPECT_EQ(m.summary().hashes_compared, 2u);
  EXPECT_EQ(m.group_steps(), 21u);
  // A THETA line is progress: the peer may be disrupted now.
  EXPECT_EQ(m.disruptable().size(), 2u);
}

// The batches trained: each step counts the group's size there (the largest any peer reported),
// a step nobody reported counts as the next reported one.
TEST_F(RunMonitorTest, WorldStepsSumTheGroupSizeOverTheSteps) {
  start("p1", 0);
  start("p2", 0);
  m.on_line("p1", theta(1, "a", 2), 1);
  m.on_line("p2", theta(1, "a", 2), 1);
  m.on_line("p1", theta(2, "b", 1), 2);  // p2 was lost: the group is one peer
  m.on_line("p1", theta(4, "c", 3), 3);  // steps 3 and 4, a joiner came
  EXPECT_EQ(m.summary().world_steps, 2u + 1u + 2u * 3u);
}

// A train peer that printed its summary exits 0 by itself: not a crash, and no longer watched
// for hangs; one that exits 0 without a summary crashed.
TEST_F(RunMonitorTest, AFinishedTrainPeerMayExitAndIsNotAHang) {
  start("p1", 0);
  start("p2", 0);
  m.on_line("p1", theta(1, "a", 2), 10);
  m.on_line("p2", theta(1, "a", 2), 10);
  m.on_finished("p1");
  m.check_progress(5000);  // p1 silent since its summary: fine; p2 hangs
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("p2"), std::string::npos);
  m.on_exit("p1", 0, 0, 5001);
  m.on_exit("p2", 0, 0, 5002);
  ASSERT_EQ(m.violations().size(), 2u);
  EXPECT_NE(m.violations()[1].find("p2 "), std::string::npos);
}

// A replacement the group never admitted, dismissed by us: neither a crash nor a churn kill.
TEST_F(RunMonitorTest, ADismissedJoinerIsNotACrashNorAKill) {
  start("p1", 0);
  m.on_spawn("p2", 0);
  ASSERT_EQ(m.not_joined(), std::vector<std::string>{"p2"});
  m.on_dismissed("p2");
  m.on_exit("p2", -1, 9, 10);
  EXPECT_TRUE(m.violations().empty());
  EXPECT_EQ(m.summary().kills, 0u);
}

}  // namespace
}  // namespace longhaul_churn
