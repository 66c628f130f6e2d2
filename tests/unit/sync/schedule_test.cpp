#include "sync/schedule.hpp"

#include <gtest/gtest.h>

#include <set>

namespace longhaul::sync {
namespace {

TEST(FragmentSchedule, EachFragmentSyncsEveryHStepsAndTheFragmentsSpreadEvenly) {
  auto s = FragmentSchedule::make(100, 4, 1);
  ASSERT_TRUE(s.is_ok());
  for (uint32_t f = 0; f < 4; ++f) {
    std::vector<uint64_t> launches;
    for (uint64_t t = 1; t < 400; ++t)
      if (uint64_t k = s->round_launched(t, f)) {
        EXPECT_EQ(s->launch_step(f, k), t);
        launches.push_back(t);
      }
    EXPECT_EQ(launches, (std::vector<uint64_t>{100 + 25 * f, 200 + 25 * f, 300 + 25 * f}))
        << "fragment " << f;
  }
  // τ = 1: each round is applied the step after its launch.
  EXPECT_EQ(s->round_applied(126, 1), 1u);
  EXPECT_EQ(s->round_applied(125, 1), 0u);
}

TEST(FragmentSchedule, AtMostOneRoundTravelsAndAdmissionFallsWhereNoneDoes) {
  for (uint32_t tau : {0u, 1u, 25u}) {
    auto s = FragmentSchedule::make(100, 4, tau);
    ASSERT_TRUE(s.is_ok());
    int in_flight = 0;
    for (uint64_t t = 1; t <= 1000; ++t) {
      // Within a step: apply, admit, launch.
      for (uint32_t f = 0; f < 4; ++f)
        if (tau > 0 && s->round_applied(t, f)) --in_flight;
      if (s->admits(t)) {
        EXPECT_EQ(in_flight, 0) << "step " << t << " tau " << tau;
      }
      for (uint32_t f = 0; f < 4; ++f)
        if (s->round_launched(t, f) && tau > 0) ++in_flight;
      EXPECT_LE(in_flight, 1) << "step " << t << " tau " << tau;
    }
  }
}

TEST(FragmentSchedule, BadParametersAreRefusedWithTheirReason) {
  EXPECT_EQ(FragmentSchedule::make(0, 1, 0).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(FragmentSchedule::make(10, 0, 0).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(FragmentSchedule::make(10, 11, 0).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(FragmentSchedule::make(10, 1, 10).status().code(), LH_ERR_INVALID_ARGUMENT);  // τ ≥ H
  EXPECT_EQ(FragmentSchedule::make(100, 4, 26).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(FragmentSchedule::make(100, 4, 25).is_ok());
  EXPECT_TRUE(FragmentSchedule::make(10, 1, 9).is_ok());
  EXPECT_NE(FragmentSchedule::make(10, 1, 10).status().message().find("below H"),
            std::string::npos);
}

}  // namespace
}  // namespace longhaul::sync
