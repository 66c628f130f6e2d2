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

}  // namespace
}  // namespace longhaul_churn
