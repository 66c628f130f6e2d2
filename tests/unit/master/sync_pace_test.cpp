// The state sync's deadlines that follow the group (issue 50, item 4): the round timeout until a
// phase has ended, then the lower median of the recent lags plus max(4 x MAD, median / 2) within
// [floor, round timeout]; a member is evicted at its k-th outlier among its last n syncs.
#include "master/sync_pace.hpp"

#include <gtest/gtest.h>

namespace longhaul::master {
namespace {

using namespace std::chrono_literals;
using Phase = SyncPace::Phase;

TEST(SyncPace, TheRoundTimeoutHoldsUntilTheGroupHasEndedAPhase) {
  SyncPace pace({});
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 30000ms), 30000ms);
  pace.record(1, Phase::kReport, {0ms, 10ms});
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 30000ms), 30000ms) << "another group";
  EXPECT_EQ(pace.deadline(1, Phase::kFetch, 30000ms), 30000ms) << "another phase";
  EXPECT_EQ(pace.deadline(1, Phase::kReport, 30000ms), 2000ms) << "quick syncs: the floor";
}

// One member 28 s behind the first in every sync of a group of two: the lower median is the first
// member's 0, so the rogue cannot set the pace.
TEST(SyncPace, OneLateMemberOfTwoDoesNotRaiseTheDeadline) {
  SyncPace pace({});
  for (int i = 0; i < 8; ++i) pace.record(0, Phase::kReport, {0ms, 28000ms});
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 30000ms), 2000ms);
}

// Honest members spread over 0..10 s: median 5 s, MAD 2.5 s, deadline 5 + 10 = 15 s, above all.
TEST(SyncPace, AGroupThatIsSlowerThanTheFloorGetsItsSpread) {
  SyncPace pace({});
  for (int i = 0; i < 4; ++i)
    pace.record(0, Phase::kReport, {0ms, 2500ms, 5000ms, 7500ms, 10000ms});
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 30000ms), 15000ms);
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 12000ms), 12000ms) << "the round timeout caps it";
}

// Regular lags (MAD 0) still get half the median on top.
TEST(SyncPace, RegularLagsKeepHalfTheMedianOfRoom) {
  SyncPace pace({});
  for (int i = 0; i < 4; ++i) pace.record(0, Phase::kReport, {0ms, 6000ms, 6000ms});
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 30000ms), 9000ms);
}

// Only the last `window` syncs count: a group that became quick gets a tight deadline again.
TEST(SyncPace, OldSyncsAreForgotten) {
  SyncPace pace({2000ms, 2, 1});
  pace.record(0, Phase::kReport, {10000ms});
  pace.record(0, Phase::kReport, {10000ms});
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 30000ms), 15000ms);
  pace.record(0, Phase::kReport, {0ms});
  pace.record(0, Phase::kReport, {0ms});
  EXPECT_EQ(pace.deadline(0, Phase::kReport, 30000ms), 2000ms);
}

TEST(SyncPace, OutliersCountOverTheMembersLastWindowOfSyncs) {
  SyncPace pace({2000ms, 4, 3});
  EXPECT_EQ(pace.count(7, "late"), 1u);
  EXPECT_EQ(pace.count(7, ""), 1u);
  EXPECT_EQ(pace.count(7, "refused"), 2u);
  EXPECT_EQ(pace.count(7, ""), 2u);
  EXPECT_EQ(pace.count(7, ""), 1u) << "the first outlier left the window of 4";
  EXPECT_EQ(pace.reasons(7), std::vector<std::string>{"refused"});
  pace.forget(7);
  EXPECT_EQ(pace.count(7, ""), 0u);
}

}  // namespace
}  // namespace longhaul::master
