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
  std::vector<float> sum(4, 0.0f);
  const Contribution codes[] = {Contribution::kCounted, Contribution::kNonFinite,
                                Contribution::kCounted, Contribution::kNone};
  for (size_t r = 0; r < 4; ++r) {
    const auto mask = contribution_mask(4, r, codes[r]);
    for (size_t i = 0; i < 4; ++i) sum[i] += mask[i];
  }
  const Tally t = tally(sum);
  EXPECT_EQ(t.counted, 2u);
  EXPECT_EQ(t.non_finite, std::vector<size_t>{1});
  EXPECT_EQ(t.none, std::vector<size_t>{3});
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
