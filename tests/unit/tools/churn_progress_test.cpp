// longhaul-churn's progress check (tools/longhaul-churn/progress_check.hpp) driven with peer lines:
// a group that steps but applies no round, or whose theta_g's validation loss does not fall, is a
// violation; a group that trains is not, whatever its members' counters started from.
#include <gtest/gtest.h>

#include "run_monitor.hpp"

namespace longhaul_churn {
namespace {

// longhaul-peer's STEP line at revision `rev`, the group having applied `applied` updates.
std::string step(uint64_t rev, uint64_t applied) {
  return "STEP step=" + std::to_string(rev - 1) + " rev=" + std::to_string(rev) +
         " hash=aa world=2 epoch=1 id=1 ar_ms=1 sync_ms=1 applied=" + std::to_string(applied);
}

// longhaul-train's THETA line after `s`, the peer having applied `rounds` rounds.
std::string theta(uint64_t s, uint64_t rounds) {
  return "THETA step=" + std::to_string(s) +
         " hash=aa world=2 epoch=1 rounds=" + std::to_string(rounds);
}

std::string val(uint64_t s, double loss) {
  return "VAL step=" + std::to_string(s) + " loss=" + std::to_string(loss);
}

class ProgressTest : public ::testing::Test {
 protected:
  // --hang-ms 1000: the derived bound is 1 s plus four round intervals.
  RunMonitor m{MonitorLimits{1000, 5000, 3000, ProgressLimits{1000, 0, 0.05}}};
  void join(const std::string& peer, double now, const std::string& extra = "") {
    m.on_spawn(peer, now);
    m.on_line(peer, "JOINED id=1 epoch=1 world=2" + extra, now);
  }
};

// Every member applies a round at the same step: it is counted once, and a newcomer's first
// report only sets its baseline (its counter starts from zero, and longhaul-train's engine has
// already applied the round of the step it joined at when it prints JOINED).
TEST_F(ProgressTest, ARoundIsCountedOnceForTheGroupAndANewcomerOnlySetsABaseline) {
  join("p1", 0, " step=0 round_every=20");
  join("p2", 0, " step=0 round_every=20");
  for (uint64_t s = 1; s <= 40; ++s) {
    const uint64_t rounds = s / 20;
    m.on_line("p1", theta(s, rounds), static_cast<double>(s));
    m.on_line("p2", theta(s, rounds), static_cast<double>(s));
  }
  join("p3", 41, " step=40 round_every=20");
  for (uint64_t s = 41; s <= 60; ++s) {
    m.on_line("p1", theta(s, 2 + s / 60), static_cast<double>(s));
    m.on_line("p3", theta(s, 1 + s / 60), static_cast<double>(s));  // joined in step 40's round
  }
  const ProgressFigures f = m.summary().progress;
  ASSERT_TRUE(f.rounds_applied.has_value());
  EXPECT_EQ(*f.rounds_applied, 3u);
  EXPECT_EQ(f.round_every_steps, 20u);
  EXPECT_DOUBLE_EQ(f.median_step_ms, 1.0);
  // 1 s of recovery + 4 intervals of 20 steps of 1 ms.
  EXPECT_DOUBLE_EQ(f.bound_ms, 1000 + 4 * 20 * 1.0);
  m.check_progress(61);
  EXPECT_TRUE(m.violations().empty());
}

// The peers step (their revisions advance, their hashes agree) but the group's count of applied
// updates stays: past the bound that is a violation, reported once, with its reason.
TEST_F(ProgressTest, StepsWithoutAnAppliedRoundPastTheBoundAreAViolation) {
  join("p1", 0);
  join("p2", 0);
  double now = 0;
  for (uint64_t rev = 1; rev <= 30; ++rev) {
    now = 50.0 * static_cast<double>(rev);
    m.on_line("p1", step(rev, 0), now);
    m.on_line("p2", step(rev, 0), now);
    m.check_progress(now);
  }
  // 1.5 s without a round, and the bound is 1 s + 4 x 50 ms.
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("applied no round"), std::string::npos) << m.violations()[0];
  EXPECT_NE(m.violations()[0].find("bound 1.2s"), std::string::npos) << m.violations()[0];
  m.check_progress(now + 900);  // the same stall: not reported again (and no peer hangs yet)
  const auto s = m.summary();
  EXPECT_EQ(s.progress_violations, 1u);
  EXPECT_EQ(s.progress.rounds_applied, 0u);
  EXPECT_GT(s.progress.longest_no_round_ms, 2000);
}

// A group whose rounds keep applying never trips the bound, however long the run; the end of the
// run stops the clock (the survivors leave, and rounds stop on purpose).
TEST_F(ProgressTest, AGroupThatAppliesRoundsPassesAndTheEndStopsTheClock) {
  join("p1", 0);
  join("p2", 0);
  for (uint64_t rev = 1; rev <= 100; ++rev) {
    const double now = 100.0 * static_cast<double>(rev);
    m.on_line("p1", step(rev, rev), now);
    m.on_line("p2", step(rev, rev), now);
    m.check_progress(now);
  }
  m.finish_progress(10000);
  m.check_progress(10900);
  ASSERT_TRUE(m.violations().empty()) << m.violations()[0];
  const auto f = m.summary().progress;
  EXPECT_EQ(f.rounds_applied, 100u);             // the first at revision 1 too: revision 0 has none
  EXPECT_DOUBLE_EQ(f.longest_no_round_ms, 100);  // not 900: the clock stopped at the end
  EXPECT_DOUBLE_EQ(f.rounds_per_min, 100 / (10000 / 60000.0));
}

// Lines without a count (an older peer binary): the rounds cannot be judged and are not.
TEST_F(ProgressTest, LinesWithoutACountAreNotJudged) {
  join("p1", 0);
  m.on_line("p1", "STEP step=0 rev=1 hash=aa world=1 epoch=1", 10);
  m.check_progress(900);
  m.finish_progress(5000);
  EXPECT_TRUE(m.violations().empty());
  EXPECT_FALSE(m.summary().progress.rounds_applied.has_value());
}

// The loss rule compares the mean of the first quarter of the evaluations with the last
// quarter's: a group that trains passes, one whose theta_g never moves fails, and a run of fewer
// than 8 evaluations is not judged.
TEST(ProgressLoss, TheLastQuarterMustBeBelowTheFirstByTheRequiredFraction) {
  ProgressCheck falling(ProgressLimits{1000, 0, 0.05});
  for (uint64_t i = 1; i <= 12; ++i) falling.on_val(50 * i, 5.0 - 0.2 * static_cast<double>(i));
  EXPECT_TRUE(falling.finish(0).empty());
  const auto f = falling.figures(0);
  EXPECT_DOUBLE_EQ(*f.val_loss_first, 5.0 - 0.2 * 2);  // steps 50..150
  EXPECT_DOUBLE_EQ(*f.val_loss_last, 5.0 - 0.2 * 11);  // steps 500..600
  EXPECT_EQ(f.val_evaluations, 12u);

  ProgressCheck flat(ProgressLimits{1000, 0, 0.05});
  for (uint64_t i = 1; i <= 12; ++i) flat.on_val(50 * i, 5.5451);
  const auto texts = flat.finish(0);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_NE(texts[0].find("did not fall"), std::string::npos) << texts[0];
  EXPECT_DOUBLE_EQ(*flat.figures(0).val_loss_drop, 0);

  ProgressCheck short_run(ProgressLimits{1000, 0, 0.05});
  for (uint64_t i = 1; i <= 7; ++i) short_run.on_val(50 * i, 5.5451);
  EXPECT_TRUE(short_run.finish(0).empty());
  EXPECT_FALSE(short_run.figures(0).val_loss_drop.has_value());

  ProgressCheck off(ProgressLimits{1000, 0, 0});  // --min-loss-drop 0
  for (uint64_t i = 1; i <= 12; ++i) off.on_val(50 * i, 5.5451);
  EXPECT_TRUE(off.finish(0).empty());
}

// VAL lines reach the check through the monitor; the first report of a step wins.
TEST_F(ProgressTest, ValLinesAreTheGroupsEvaluations) {
  join("p1", 0);
  join("p2", 0);
  for (uint64_t i = 1; i <= 8; ++i) {
    m.on_line("p1", val(50 * i, 5.5), 1);
    m.on_line("p2", val(50 * i, 5.5), 1);
  }
  m.finish_progress(2);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_EQ(m.summary().progress.val_evaluations, 8u);
  EXPECT_EQ(m.summary().progress_violations, 1u);
}

}  // namespace
}  // namespace longhaul_churn
