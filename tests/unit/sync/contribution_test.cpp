#include "sync/contribution.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/worker_pool.hpp"

namespace longhaul::sync {
namespace {

TEST(Contribution, TheDeltaIsGlobalMinusLocalAndANonFiniteOneBecomesZeros) {
  runtime::WorkerPool workers(2);
  std::vector<float> global{1.0f, 2.0f, 3.0f}, delta{0.5f, 2.5f, 3.0f};
  EXPECT_TRUE(form_delta(global, delta, workers));
  EXPECT_EQ(delta, (std::vector<float>{0.5f, -0.5f, 0.0f}));
  std::vector<float> big(200000, 1.0f), bad(200000, 0.0f);
  bad[150000] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(form_delta(big, bad, workers));
  for (float x : bad) ASSERT_EQ(x, 0.0f);
}

TEST(Contribution, TheSummedMasksTellWhoCountedWhoWasExcludedAndWhoHadNothing) {
  std::vector<float> sum(8, 0.0f);
  const Contribution codes[] = {Contribution::kCounted, Contribution::kNonFinite,
                                Contribution::kCounted, Contribution::kNone};
  for (size_t r = 0; r < 4; ++r) {
    const auto mask = contribution_mask(4, r, codes[r], 77, false);
    for (size_t i = 0; i < 8; ++i) sum[i] += mask[i];
  }
  const Tally t = tally(sum, 77);
  EXPECT_EQ(t.counted, 2u);
  EXPECT_EQ(t.non_finite, std::vector<size_t>{1});
  EXPECT_EQ(t.none, std::vector<size_t>{3});
  EXPECT_FALSE(t.misaligned);
}

TEST(Contribution, AMemberInAnotherRoundMakesTheTallyMisaligned) {
  std::vector<float> sum(6, 0.0f);
  const uint32_t rounds[] = {12, 12, 10};
  for (size_t r = 0; r < 3; ++r) {
    const auto mask = contribution_mask(3, r, Contribution::kCounted, rounds[r], false);
    for (size_t i = 0; i < 6; ++i) sum[i] += mask[i];
  }
  EXPECT_TRUE(tally(sum, 12).misaligned);
  EXPECT_TRUE(tally(sum, 10).misaligned);
  // Identities are exact up to 2^24 - 1 and wrap above.
  const auto big = contribution_mask(1, 0, Contribution::kCounted, (1u << 24) + 5, false);
  EXPECT_FALSE(tally(big, 5).misaligned);
}

TEST(Contribution, AChangeOneMemberSawPendingReachesTheWholeTallyAndLeavesTheCodes) {
  std::vector<float> sum(6, 0.0f);
  const Contribution codes[] = {Contribution::kCounted, Contribution::kNonFinite,
                                Contribution::kNone};
  for (size_t r = 0; r < 3; ++r) {
    const auto mask = contribution_mask(3, r, codes[r], 9, /*change_pending=*/r == 1);
    for (size_t i = 0; i < 6; ++i) sum[i] += mask[i];
  }
  const Tally t = tally(sum, 9);
  EXPECT_TRUE(t.change_pending);
  EXPECT_EQ(t.counted, 1u);
  EXPECT_EQ(t.non_finite, std::vector<size_t>{1});
  EXPECT_EQ(t.none, std::vector<size_t>{2});
  EXPECT_FALSE(tally(contribution_mask(2, 0, Contribution::kCounted, 9, false), 9).change_pending);
}

// The sparse codec's refusals are written into the summed masks by every member alike: the member
// leaves the count, is listed as malformed, and keeps the change it saw pending.
TEST(Contribution, AMemberMarkedMalformedLeavesTheCountAndKeepsItsPendingFlag) {
  std::vector<float> sum(6, 0.0f);
  for (size_t r = 0; r < 3; ++r) {
    const auto mask = contribution_mask(3, r, Contribution::kCounted, 4, /*change_pending=*/r == 2);
    for (size_t i = 0; i < 6; ++i) sum[i] += mask[i];
  }
  EXPECT_EQ(code_of(sum, 2), Contribution::kCounted);
  mark_malformed(sum, 2);
  mark_malformed(sum, 0);
  EXPECT_EQ(code_of(sum, 2), Contribution::kMalformed);
  EXPECT_EQ(code_of(sum, 1), Contribution::kCounted);
  const Tally t = tally(sum, 4);
  EXPECT_EQ(t.counted, 1u);
  EXPECT_EQ(t.malformed, (std::vector<size_t>{0, 2}));
  EXPECT_TRUE(t.non_finite.empty());
  EXPECT_TRUE(t.change_pending);
  EXPECT_FALSE(t.misaligned);
}

TEST(Contribution, TheMeanIsOverTheCountedMembersOnly) {
  runtime::WorkerPool workers(1);
  std::vector<float> sum{3.0f, 6.0f, -9.0f};
  average(sum, 3, workers);
  EXPECT_EQ(sum, (std::vector<float>{1.0f, 2.0f, -3.0f}));
  std::vector<float> one{7.0f};
  average(one, 1, workers);
  EXPECT_EQ(one[0], 7.0f);
}

}  // namespace
}  // namespace longhaul::sync
