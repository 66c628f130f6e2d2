// The sync engine's membership and failures over a fake group: a round that lost a member is
// retried over the survivors (or dropped, by policy or method), a round that failed with everyone
// there is dropped, a joiner comes in at the admission point with the group's θ_g, and a non-finite
// contribution is left out and named. θ_g stays bit-identical on every surviving member.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "fake_trainers.hpp"

namespace longhaul::sync::testing {
namespace {

std::vector<Trainer*> first(std::vector<Trainer>& t, size_t n) {
  std::vector<Trainer*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(&t[i]);
  return out;
}

// Three trainers at H = 2 run to step 3 (one round applied); then member 3 dies in the middle of
// the all-reduce of the round launched at step 4 and the others run to step 6.
std::vector<Trainer> lose_member_mid_round(FakeWorld& world, EngineOptions o) {
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, o);
  run_until(t, 3);
  world.kill_after_sends(3, 1);
  run_until(t, 6);
  return t;
}

TEST(EngineFakeMembership, ARoundThatLostAMemberIsRetriedOverTheSurvivors) {
  FakeWorld world;
  auto t = lose_member_mid_round(world, options(2));
  EXPECT_EQ(t[2].status.code(), LH_ERR_PEER_LOST);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(t[i].status) << t[i].status.to_string();
    const auto stats = t[i].engine->stats();
    EXPECT_EQ(stats.rounds_applied, 3u);  // steps 2, 4 (retried), 6
    EXPECT_EQ(stats.rounds_dropped, 0u);
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.last_round->participants, 2u);
  }
  expect_identical(first(t, 2));
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2}));
}

TEST(EngineFakeMembership, WithTheDropPolicyALostMembersRoundIsDropped) {
  FakeWorld world;
  auto o = options(2);
  o.on_loss = LossPolicy::kDrop;
  auto t = lose_member_mid_round(world, o);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(t[i].status) << t[i].status.to_string();
    const auto stats = t[i].engine->stats();
    EXPECT_EQ(stats.rounds_applied, 2u);  // steps 2 and 6
    EXPECT_EQ(stats.rounds_dropped, 1u);
    EXPECT_EQ(stats.retries, 0u);
  }
  expect_identical(first(t, 2));
}

TEST(EngineFakeMembership, ADelayedMethodDropsARoundThatLostAMember) {
  FakeWorld world;
  auto t = lose_member_mid_round(world, options(2, 1, 0, Method::kCo2));
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(t[i].status) << t[i].status.to_string();
    EXPECT_EQ(t[i].engine->stats().rounds_dropped, 1u);
    EXPECT_EQ(t[i].engine->stats().retries, 0u);
  }
  run_until(first(t, 2), 10);
  for (size_t i = 0; i < 2; ++i) EXPECT_GE(t[i].engine->stats().rounds_applied, 3u);
  expect_identical(first(t, 2));
}

TEST(EngineFakeMembership, ARoundThatFailedWithNobodyLostIsDroppedEverywhere) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, options(2));
  run_until(t, 3);
  world.fail_reports(2);  // the round of step 4 fails on member 2's word
  run_until(t, 6);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(tr.engine->stats().rounds_applied, 2u);
    EXPECT_EQ(tr.engine->stats().rounds_dropped, 1u);
    EXPECT_EQ(tr.engine->stats().retries, 0u);  // a retry with everyone there would fail again
  }
  expect_identical(t);
  EXPECT_EQ(world.epochs_formed(), 2u);  // the failed epoch was re-formed
}

TEST(EngineFakeMembership, AJoinerIsAdmittedAtTheAdmissionPointAndAdoptsThetaG) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  const auto o = options(2);
  start_all(t, o);
  run_until(t, 1);
  FakeMember& newcomer = world.add();  // seen pending by the round of step 2
  Trainer joiner(&newcomer, 42.0f, 4.0f);
  std::vector<Trainer*> everyone{&t[0], &t[1], &t[2], &joiner};
  uint64_t joined_at = 0;
  in_parallel(2, [&](size_t part) {
    if (part == 0) return run_until(t, 4);  // admits at step 4
    ASSERT_TRUE(newcomer.connect());
    ASSERT_TRUE(start(joiner, o)) << joiner.status.to_string();
    joined_at = joiner.engine->step_count();
  });
  EXPECT_EQ(joined_at, 4u);
  EXPECT_EQ(joiner.flat(),
            std::vector<float>(t[0].engine->theta_g(0).begin(), t[0].engine->theta_g(0).end()));
  expect_identical(everyone);
  run_until(everyone, 8);
  for (const Trainer* tr : everyone) ASSERT_TRUE(tr->status) << tr->status.to_string();
  expect_identical(everyone);
  EXPECT_EQ(t[0].engine->stats().last_round->participants, 4u);  // counted from step 6
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 3, 4}));
}

TEST(EngineFakeMembership, ANonFiniteContributionIsExcludedAndNamed) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, options(2));
  run_until(t, 4, [](size_t i, uint64_t step, Trainer& tr) {
    if (i == 1 && step == 4) tr.params[2][3] = std::numeric_limits<float>::quiet_NaN();
    return true;
  });
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    const auto stats = tr.engine->stats();
    EXPECT_EQ(stats.rounds_applied, 2u);
    EXPECT_EQ(stats.non_finite_excluded, 1u);
    EXPECT_EQ(stats.last_round->participants, 2u);
    EXPECT_EQ(stats.last_round->non_finite_peers, (std::vector<uint64_t>{2}));
    EXPECT_TRUE(all_finite(tr.engine->theta_g(0)));
    EXPECT_TRUE(all_finite(tr.flat()));  // member 2 too: θ_local ← θ_g
  }
  expect_identical(t);
}

TEST(EngineFakeMembership, AMemberThatLeavesBetweenRoundsIsLeftOutOfTheNext) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, options(2));
  run_until(t, 3);
  world.leave(3);
  t[2].stopped = true;
  run_until(first(t, 2), 6);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(t[i].status) << t[i].status.to_string();
    EXPECT_GE(t[i].engine->stats().rounds_applied, 2u);
    EXPECT_EQ(t[i].engine->stats().last_round->participants, 2u);
  }
  expect_identical(first(t, 2));
}

TEST(EngineFakeMembership, AMemberLostInTheJoinersStateSyncIsLeftOutAndTheSyncRepeated) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  const auto o = options(2);
  start_all(t, o);
  run_until(t, 1);
  FakeMember& newcomer = world.add();
  Trainer joiner(&newcomer, 42.0f, 4.0f);
  // Epoch 2 admits the joiner; member 3 dies reporting its part of the sync that follows.
  world.on_report([&](PeerId id, uint64_t epoch, uint64_t, bool) {
    if (id == 3 && epoch == 2) world.kill(3);
  });
  in_parallel(2, [&](size_t part) {
    if (part == 0) return run_until(t, 4);
    ASSERT_TRUE(newcomer.connect());
    ASSERT_TRUE(start(joiner, o)) << joiner.status.to_string();
  });
  EXPECT_EQ(t[2].status.code(), LH_ERR_PEER_LOST);
  std::vector<Trainer*> survivors{&t[0], &t[1], &joiner};
  run_until(survivors, 8);
  for (const Trainer* tr : survivors) ASSERT_TRUE(tr->status) << tr->status.to_string();
  expect_identical(survivors);
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 4}));
  EXPECT_EQ(t[1].engine->stats().last_round->participants, 3u);
}

TEST(EngineFakeMembership, ARoundPastItsDeadlineIsDroppedAsLateAndTheNextOneApplies) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  auto o = options(2);
  o.deadline = std::chrono::milliseconds(400);  // far above a round here, even on a busy machine
  start_all(t, o);
  run_until(t, 3);
  world.link(2, 3)->hold_sends([](transport::Tag) { return true; });  // until the epoch ends
  run_until(t, 6);
  uint64_t late = 0;
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    const auto stats = tr.engine->stats();
    // Late where the deadline passed first; the abort there fails the others' parts sooner.
    late += stats.rounds_late;
    EXPECT_EQ(stats.rounds_dropped, 1u);
    EXPECT_EQ(stats.rounds_applied, 2u);  // steps 2 and 6
  }
  EXPECT_GE(late, 1u);
  expect_identical(t);
}

}  // namespace
}  // namespace longhaul::sync::testing
