// The adaptive round deadline over a fake group (docs/training.md, "The adaptive deadline"): the
// cap until four applied rounds were measured, then the group's measured time within [1 s, cap],
// which the engine waits with (a round held past it is dropped as late long before the cap); with
// the option off, the deadline stays the configured one.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "fake_trainers.hpp"

namespace longhaul::sync::testing {
namespace {

using std::chrono::milliseconds;

// Far above anything a round here takes: a test that passes because of it would take this long.
constexpr milliseconds kCap{30000};

EngineOptions adaptive_deadline() {
  auto o = options(/*H=*/2);
  o.deadline = kCap;
  o.adaptive_deadline = true;
  return o;
}

milliseconds deadline(const Trainer& t) {
  return t.engine->stats().deadline;
}

// Rounds at steps 2, 4, ...; round k's masks carry the sync times of round k − 1, so rounds 2 to 5
// give the four samples and round 6 (step 12) is the first that waits with a measured deadline:
// rounds on in-process links take far less than the floor.
TEST(EngineFakeDeadline, TheCapHoldsUntilFourRoundsWereMeasuredThenTheFloorOfFastRounds) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 2.0f, 3.0f});
  start_all(t, adaptive_deadline());
  for (const auto& tr : t) EXPECT_EQ(deadline(tr), milliseconds(0));  // no round settled yet
  run_until(t, 10);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(deadline(tr), kCap);
  }
  run_until(t, 12);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(deadline(tr), RoundDeadline::kFloor);
    EXPECT_EQ(tr.engine->stats().rounds_applied, 6u);
  }
  expect_identical(t);
}

TEST(EngineFakeDeadline, ARoundHeldPastTheAdaptiveDeadlineIsDroppedLongBeforeTheCap) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, adaptive_deadline());
  run_until(t, 11);  // five rounds applied: the next waits one second
  world.link(2, 3)->hold_sends([](transport::Tag) { return true; });  // until the epoch ends
  const auto t0 = std::chrono::steady_clock::now();
  run_until(t, 14);
  const auto took = std::chrono::steady_clock::now() - t0;
  uint64_t late = 0;
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    const auto stats = tr.engine->stats();
    late += stats.rounds_late;
    EXPECT_EQ(stats.rounds_dropped, 1u);
    EXPECT_EQ(stats.rounds_applied, 6u);  // steps 2 to 10, and 14
  }
  EXPECT_GE(late, 1u);
  EXPECT_LT(took, kCap / 3);
  expect_identical(t);
}

TEST(EngineFakeDeadline, WithoutTheOptionTheDeadlineStaysTheConfiguredOne) {
  FakeWorld world;
  auto t = trainers(world.form(2), {1.0f, 2.0f});
  auto o = options(/*H=*/2);
  o.deadline = kCap;
  start_all(t, o);
  run_until(t, 14);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(deadline(tr), kCap);
    EXPECT_EQ(tr.engine->stats().rounds_applied, 7u);
  }
}

}  // namespace
}  // namespace longhaul::sync::testing
