// The sync engine's rounds over a fake group (no socket, no master process): DiLoCo, Streaming
// DiLoCo and the delayed methods keep θ_g bit-identical on every member; a round takes the mean
// of the members' parameters; the start elects one θ_g. Membership and failures are in
// engine_fake_membership_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "fake_trainers.hpp"

namespace longhaul::sync::testing {
namespace {

TEST(EngineFake, TheStartElectsTheLowestIdsParametersWhenEveryMemberDiffers) {
  FakeWorld world;
  auto t = trainers(world.form(3), {3.0f, 1.0f, 2.0f});
  start_all(t, options(2));
  expect_identical(t);
  for (const auto& tr : t) {
    EXPECT_EQ(tr.flat(), std::vector<float>(kRanges * kPerRange, 3.0f));  // θ_local ← θ_g
    EXPECT_EQ(tr.engine->step_count(), 0u);
  }
  EXPECT_EQ(t[2].engine->theta_g(0)[0], 3.0f);
}

TEST(EngineFake, TheStartElectsThePopularParameters) {
  FakeWorld world;
  auto t = trainers(world.form(3), {5.0f, 7.0f, 7.0f});
  start_all(t, options(2));
  for (const auto& tr : t) EXPECT_EQ(tr.flat(), std::vector<float>(kRanges * kPerRange, 7.0f));
}

TEST(EngineFake, ADiLoCoRoundSetsThetaGToTheMeanOfTheMembersParameters) {
  FakeWorld world;
  auto t = trainers(world.form(3), {0.0f, 0.0f, 0.0f});
  start_all(t, options(2));
  std::vector<std::vector<float>> before(3);
  run_until(t, 2, [&](size_t i, uint64_t step, Trainer& tr) {
    if (step == 2) before[i] = tr.flat();
    return true;
  });
  for (const auto& tr : t) ASSERT_TRUE(tr.status) << tr.status.to_string();
  expect_identical(t);
  const auto theta = t[0].engine->theta_g(0);
  ASSERT_EQ(theta.size(), kRanges * kPerRange);
  for (size_t j = 0; j < theta.size(); ++j) {
    const float mean = (before[0][j] + before[1][j] + before[2][j]) / 3.0f;
    EXPECT_NEAR(theta[j], mean, 1e-5f) << "element " << j;
  }
  EXPECT_EQ(t[1].flat(), std::vector<float>(theta.begin(), theta.end()));  // merged back
  const auto stats = t[1].engine->stats();
  EXPECT_EQ(stats.rounds_applied, 1u);
  ASSERT_TRUE(stats.last_round);
  EXPECT_EQ(stats.last_round->participants, 3u);
}

TEST(EngineFake, DiLoCoOverManyRoundsKeepsEveryMemberIdentical) {
  FakeWorld world;
  auto t = trainers(world.form(4), {1.0f, 1.0f, 1.0f, 1.0f});
  auto o = options(3);
  o.nesterov = {0.7f, 0.9f};
  start_all(t, o);
  run_until(t, 12);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(tr.engine->stats().rounds_applied, 4u);
    EXPECT_EQ(tr.engine->stats().rounds_dropped, 0u);
  }
  expect_identical(t);
  EXPECT_EQ(world.epochs_formed(), 1u);  // nobody came or went: no re-formation
}

TEST(EngineFake, StreamingDiLoCoAppliesEveryFragmentsRoundsAfterTheirDelay) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 2.0f, 3.0f});
  start_all(t, options(3, /*fragments=*/3, /*delay=*/1));
  run_until(t, 12);
  // Fragment f launches at 3k + f: f0 at 3, 6, 9, 12; f1 at 4, 7, 10; f2 at 5, 8, 11.
  for (const auto& tr : t) EXPECT_EQ(tr.engine->stats().rounds_applied, 9u);
  close_all(t);  // close settles the round in flight with the group
  for (const auto& tr : t) {
    EXPECT_EQ(tr.engine->stats().rounds_applied, 10u);  // close applies the one in flight
    EXPECT_EQ(tr.engine->layout().fragments(), 3u);
  }
  expect_identical(t);
}

TEST(EngineFake, Co2AppliesEachRoundWhereTheNextIsLaunched) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, options(2, 1, 0, Method::kCo2));
  run_until(t, 8);
  for (const auto& tr : t) EXPECT_EQ(tr.engine->stats().rounds_applied, 3u);  // 2, 4, 6
  close_all(t);  // close settles the round in flight with the group
  for (const auto& tr : t) EXPECT_EQ(tr.engine->stats().rounds_applied, 4u);
  expect_identical(t);
  EXPECT_TRUE(all_finite(t[0].engine->theta_g(0)));
}

TEST(EngineFake, EagerKeepsEveryMembersThetaGIdentical) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, options(3, 1, 0, Method::kEager));
  run_until(t, 12);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(tr.engine->stats().rounds_applied, 3u);  // 3, 6, 9 (12's is in flight)
  }
  expect_identical(t);
}

TEST(EngineFake, ADelayedMethodRefusesFragments) {
  FakeWorld world;
  auto t = trainers(world.form(1), {1.0f});
  EXPECT_EQ(start(t[0], options(4, 2, 0, Method::kEager)).code(), LH_ERR_INVALID_ARGUMENT);
}

TEST(EngineFake, AQuantizedRoundStaysBitIdenticalOnEveryMember) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  auto o = options(2);
  o.codec = quant::Codec::kU8;
  o.block = 16;
  start_all(t, o);
  run_until(t, 6);
  for (const auto& tr : t) EXPECT_EQ(tr.engine->stats().rounds_applied, 3u);
  expect_identical(t);
}

}  // namespace
}  // namespace longhaul::sync::testing
