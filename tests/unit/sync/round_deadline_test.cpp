// The adaptive round deadline's pure part (round_deadline.hpp): median + max(4 · MAD, median / 2)
// over the last 16 samples, within [1 s, the cap]; the cap until 4 were taken; the fastest
// member's report as a round's sample.
#include "sync/round_deadline.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sync/options.hpp"
#include "sync/overlap.hpp"

namespace longhaul::sync {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kCap{60000};

RoundDeadline with(std::initializer_list<float> samples, milliseconds cap = kCap) {
  RoundDeadline d(cap);
  for (float s : samples) d.add(s);
  return d;
}

TEST(RoundDeadline, IsTheMedianPlusFourMadsWhenTheSamplesSpreadWide) {
  // Median 3000, deviations {1000, 0, 0, 1000, 5000}: MAD 1000; 3000 + 4000 beats 3000 + 1500.
  EXPECT_EQ(with({2000, 3000, 3000, 4000, 8000}).deadline(), milliseconds(7000));
}

TEST(RoundDeadline, IsTheMedianAndAHalfWhenTheSamplesAgree) {
  // MAD 0: median / 2 is the margin left (jitter the window has not seen yet).
  EXPECT_EQ(with({2000, 2000, 2000, 2000}).deadline(), milliseconds(3000));
  // An even count: the mean of the middle two (2500), MAD of {500, 500, 500, 500} = 500;
  // 2500 + max(2000, 1250).
  EXPECT_EQ(with({2000, 3000, 2000, 3000}).deadline(), milliseconds(4500));
}

TEST(RoundDeadline, RoundsUpToWholeMilliseconds) {
  EXPECT_EQ(with({1000.2f, 1000.2f, 1000.2f, 1000.2f}).deadline(), milliseconds(1501));
}

TEST(RoundDeadline, NeverGoesBelowOneSecond) {
  EXPECT_EQ(with({10, 12, 11, 10, 13}).deadline(), RoundDeadline::kFloor);
  EXPECT_EQ(RoundDeadline::kFloor, milliseconds(1000));
}

TEST(RoundDeadline, NeverGoesAboveTheCapWhichWinsOverTheFloor) {
  EXPECT_EQ(with({9000, 9000, 9000, 9000}, milliseconds(5000)).deadline(), milliseconds(5000));
  EXPECT_EQ(with({10, 10, 10, 10}, milliseconds(300)).deadline(), milliseconds(300));
}

TEST(RoundDeadline, IsTheCapUntilFourRoundsWereMeasured) {
  RoundDeadline d(kCap);
  EXPECT_EQ(d.deadline(), kCap);
  for (int i = 0; i < 3; ++i) {
    d.add(2000);
    EXPECT_EQ(d.deadline(), kCap) << i + 1 << " samples";
  }
  d.add(2000);
  EXPECT_EQ(d.deadline(), milliseconds(3000));
}

TEST(RoundDeadline, NoDeadlineStaysNone) {
  EXPECT_EQ(with({2000, 2000, 2000, 2000}, milliseconds(0)).deadline(), milliseconds(0));
}

TEST(RoundDeadline, IgnoresRoundsNobodyMeasured) {
  RoundDeadline d = with({2000, 2000, 2000});
  d.add(0.0f);
  d.add(-5.0f);
  d.add(std::numeric_limits<float>::quiet_NaN());
  d.add(std::numeric_limits<float>::infinity());
  EXPECT_EQ(d.samples(), 3u);
  EXPECT_EQ(d.deadline(), kCap);
}

TEST(RoundDeadline, KeepsOnlyTheLastSixteenRounds) {
  RoundDeadline d(kCap);
  for (size_t i = 0; i < RoundDeadline::kWindow; ++i) d.add(20000);
  EXPECT_EQ(d.deadline(), milliseconds(30000));
  // Half the window faster: the median is the middle two's mean, still far from either.
  for (size_t i = 0; i < RoundDeadline::kWindow / 2; ++i) d.add(2000);
  EXPECT_EQ(d.samples(), RoundDeadline::kWindow);
  // Median 11000, MAD 9000: 11000 + 36000.
  EXPECT_EQ(d.deadline(), milliseconds(47000));
  // The whole window replaced: the slow rounds are forgotten.
  for (size_t i = 0; i < RoundDeadline::kWindow / 2; ++i) d.add(2000);
  EXPECT_EQ(d.deadline(), milliseconds(3000));
}

// A round's sample is the fastest member's report: the one that launched last waited for
// nobody, while a late member's own time says nothing about the network.
TEST(RoundDeadline, ARoundsSampleIsTheFastestMembersSyncTime) {
  const std::vector<OverlapReport> reports{{2, 2400.0f}, {0, 0.0f}, {3, 900.5f}, {1, 1200.0f}};
  std::vector<float> sum(kOverlapSlots * reports.size(), 0.0f);
  for (size_t r = 0; r < reports.size(); ++r) {
    std::vector<float> mine(sum.size());
    write_report(mine, r, reports[r]);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += mine[i];
  }
  EXPECT_EQ(read_reports(sum).fastest_sync_ms, 900.5f);  // who reported nothing is left out
  EXPECT_EQ(read_reports(std::vector<float>(8, 0.0f)).fastest_sync_ms, 0.0f);
  EXPECT_EQ(read_reports({}).fastest_sync_ms, 0.0f);
}

TEST(RoundDeadline, TheAdaptiveDeadlineNeedsADeadlineToCapIt) {
  static std::vector<float> w(100);
  EngineOptions o;
  o.ranges = {{w.data(), 100, quant::DType::kF32}};
  o.adaptive_deadline = true;
  const Status s = validate(o);
  EXPECT_EQ(s.code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("adaptive deadline"), std::string::npos) << s.message();
  o.deadline = milliseconds(30000);
  EXPECT_TRUE(validate(o).is_ok());
  EXPECT_FALSE(EngineOptions{}.adaptive_deadline);
}

// A deadline is each peer's own: it is not part of the configuration the group must agree on.
TEST(RoundDeadline, TheDeadlineIsNoPartOfTheConfigurationTag) {
  std::vector<float> w(100);
  auto layout = Layout::make({{w.data(), 100, quant::DType::kF32}}, {}, 1);
  ASSERT_TRUE(layout.is_ok());
  EngineOptions o;
  o.ranges = {{w.data(), 100, quant::DType::kF32}};
  const std::string base = config_tag(o, *layout);
  o.deadline = milliseconds(30000);
  o.adaptive_deadline = true;
  EXPECT_EQ(config_tag(o, *layout), base);
}

}  // namespace
}  // namespace longhaul::sync
