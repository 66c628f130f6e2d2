// Sizing the overlap's pure parts (docs/overlap.md): the steps a sync time needs, the reports in a
// round's masks and what the group reads from them, τ for the next cycle within its bounds, the
// step clock, the schedule's bound on τ and the options that turn it on.
#include "sync/overlap.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "sync/options.hpp"
#include "sync/schedule.hpp"

namespace longhaul::sync {
namespace {

using std::chrono::milliseconds;

TEST(Overlap, TheStepsNeededCoverTheSyncTimeAndItsMargin) {
  EXPECT_EQ(steps_needed(milliseconds(250), milliseconds(100), 0.2f), 3u);  // 300 ms: 3 steps
  EXPECT_EQ(steps_needed(milliseconds(260), milliseconds(100), 0.2f), 4u);  // 312 ms: 4 steps
  EXPECT_EQ(steps_needed(milliseconds(200), milliseconds(100), 0.0f), 2u);
  EXPECT_EQ(steps_needed(milliseconds(0), milliseconds(100), 0.2f), 1u);  // at least one step
  EXPECT_EQ(steps_needed(milliseconds(500), milliseconds(0), 0.2f), 0u);  // no step timed yet
}

TEST(Overlap, TheGroupReadsTheMostStepsAndTheSlowestSyncOfItsMembersReports) {
  const std::vector<OverlapReport> reports{{2, 150.0f}, {5, 480.5f}, {0, 0.0f}};
  std::vector<float> sum(kOverlapSlots * reports.size(), 0.0f);
  for (size_t r = 0; r < reports.size(); ++r) {
    std::vector<float> mine(sum.size(), 1.0f);  // overwritten: zeros but its own
    write_report(mine, r, reports[r]);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += mine[i];
  }
  const GroupReport g = read_reports(sum);
  EXPECT_EQ(g.steps_needed, 5u);
  EXPECT_EQ(g.slowest_sync_ms, 480.5f);
  EXPECT_EQ(read_reports(std::vector<float>(6, 0.0f)).steps_needed, 0u);  // nobody measured
}

TEST(Overlap, TheNextDelayIsTheNeedWithinOneAndTheCap) {
  EXPECT_EQ(next_delay(3, 1, 5), 3u);  // grows
  EXPECT_EQ(next_delay(1, 4, 5), 1u);  // shrinks
  EXPECT_EQ(next_delay(9, 1, 5), 5u);  // never past the cap
  EXPECT_EQ(next_delay(0, 4, 5), 4u);  // nothing measured: unchanged
  EXPECT_EQ(next_delay(0, 4, 2), 2u);
  EXPECT_EQ(next_delay(3, 0, 0), 0u);  // H = 1 admits no overlap
}

TEST(Overlap, TheStepClockTimesTheTrainersComputeOnlyAndWeighsTheNewestStepByAQuarter) {
  StepClock clock;
  const auto t0 = StepClock::Clock::now();
  clock.enter(t0);  // the first call: no step before it
  EXPECT_EQ(clock.step().count(), 0);
  clock.leave(t0 + milliseconds(500));  // the engine blocked: not compute
  clock.enter(t0 + milliseconds(510));
  EXPECT_EQ(clock.step(), milliseconds(10));
  clock.leave(t0 + milliseconds(520));
  clock.enter(t0 + milliseconds(550));
  EXPECT_EQ(clock.step(), milliseconds(15));  // (3 · 10 + 30) / 4
}

TEST(Overlap, TheScheduleBoundsTauBelowHAndAtHOverF) {
  EXPECT_EQ(FragmentSchedule::max_delay(8, 2), 4u);
  EXPECT_EQ(FragmentSchedule::max_delay(9, 2), 4u);
  EXPECT_EQ(FragmentSchedule::max_delay(8, 1), 7u);
  EXPECT_EQ(FragmentSchedule::max_delay(4, 4), 1u);
  EXPECT_EQ(FragmentSchedule::max_delay(1, 1), 0u);
  auto s = FragmentSchedule::make(100, 4, 1);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->delay_bound(), 25u);
  EXPECT_EQ(s->round_applied(105, 0, 5), 1u);  // round 1 of fragment 0 launched at 100
  EXPECT_EQ(s->round_applied(105, 0, 4), 0u);
}

EngineOptions adaptive() {
  EngineOptions o;
  o.sync_every = 50;
  o.fragments = 4;
  o.delay = 1;
  o.adaptive_delay = true;
  return o;
}

TEST(Overlap, TheAdaptiveDelayIsOffByDefaultAndAFixedTausTagDoesNotChange) {
  const EngineOptions o;
  EXPECT_FALSE(o.adaptive_delay);
  EXPECT_EQ(o.max_staleness_steps, 5u);
  std::vector<float> params(8, 0.0f);
  auto layout = Layout::make({{params.data(), params.size(), quant::DType::kF32, false}}, {}, 1);
  ASSERT_TRUE(layout.is_ok());
  const std::string fixed = config_tag(o, *layout);
  EXPECT_EQ(fixed.find("adaptive"), std::string::npos);
  EngineOptions on = o;
  on.adaptive_delay = true;
  EXPECT_NE(config_tag(on, *layout), fixed);  // every member must size τ alike
  EngineOptions bound = on;
  bound.max_staleness_steps = 6;
  EXPECT_NE(config_tag(bound, *layout), config_tag(on, *layout));
}

TEST(Overlap, TheOptionsRefuseWhatCannotBeSized) {
  EXPECT_TRUE(validate(adaptive()).is_ok());
  auto co2 = adaptive();
  co2.method = Method::kCo2;
  co2.fragments = 1;
  co2.delay = 0;
  EXPECT_EQ(validate(co2).code(), LH_ERR_UNSUPPORTED);  // already a whole round
  auto no_bound = adaptive();
  no_bound.max_staleness_steps = 0;
  EXPECT_EQ(validate(no_bound).code(), LH_ERR_INVALID_ARGUMENT);
  auto first_too_far = adaptive();
  first_too_far.delay = 6;
  EXPECT_EQ(validate(first_too_far).code(), LH_ERR_INVALID_ARGUMENT);
  auto margin = adaptive();
  margin.overlap_margin = -0.5f;
  EXPECT_EQ(validate(margin).code(), LH_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace longhaul::sync
