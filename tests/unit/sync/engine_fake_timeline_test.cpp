// The engine's figures for a timeline (EngineStats::in_flight, RoundReport::launched_at and
// ready_at; docs/overlap.md, "What it reports") over a fake group: after each step they name the
// round in flight as the schedule has it, and a settled round's launch and ready times bracket
// its time on the (slowed) links.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "fake_trainers.hpp"

namespace longhaul::sync::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kSlow{30};  // each send's delay: a round takes at least this long

// What the trainer saw after each of its steps.
struct Seen {
  uint64_t step = 0;
  std::optional<InFlightRound> in_flight;
  std::optional<RoundReport> last_round;
};

TEST(EngineFakeTimeline, StatsNameTheRoundInFlightAndTheSettledRoundsLaunchAndReadyTimes) {
  FakeWorld world;
  world.delay_sends(kSlow);
  auto t = trainers(world.form(2), {1.0f, 2.0f});
  // Streaming: H = 4, F = 2, τ = 2 fixed; fragment f launches round k at 4k + 2f.
  start_all(t, options(/*H=*/4, /*F=*/2, /*tau=*/2));
  std::vector<std::vector<Seen>> seen(t.size());
  // The hook runs before step s: what it reads is what step s − 1 left.
  run_until(t, 13, [&](size_t i, uint64_t step, Trainer& tr) {
    const EngineStats s = tr.engine->stats();
    seen[i].push_back({step - 1, s.in_flight, s.last_round});
    return true;
  });
  for (const auto& tr : t) ASSERT_TRUE(tr.status) << tr.status.to_string();
  const FragmentSchedule schedule = *FragmentSchedule::make(4, 2, 2);
  for (const Seen& v : seen[0]) {
    // The round launched at l stays in flight after steps l and l + 1 (applied at l + 2).
    std::optional<std::pair<uint32_t, uint64_t>> want;
    for (uint64_t l : {v.step, v.step - 1})
      for (uint32_t f = 0; f < 2 && v.step >= 1 && l >= 1; ++f)
        if (uint64_t k = schedule.round_launched(l, f); k != 0) want = {{f, k}};
    ASSERT_EQ(v.in_flight.has_value(), want.has_value()) << "after step " << v.step;
    if (!want) continue;
    EXPECT_EQ(v.in_flight->fragment, want->first) << "after step " << v.step;
    EXPECT_EQ(v.in_flight->round, want->second) << "after step " << v.step;
    EXPECT_EQ(v.in_flight->apply_step, schedule.launch_step(want->first, want->second) + 2);
    EXPECT_NE(v.in_flight->launched_at, Clock::time_point{});
  }
  // Settled rounds: launched before their result was ready, at least one slowed send apart.
  size_t settled = 0;
  for (const Seen& v : seen[0]) {
    if (!v.last_round) continue;
    ++settled;
    EXPECT_NE(v.last_round->launched_at, Clock::time_point{});
    EXPECT_GE(v.last_round->ready_at - v.last_round->launched_at, kSlow)
        << "round " << v.last_round->round << " of fragment " << v.last_round->fragment;
  }
  EXPECT_GT(settled, 0u);
  close_all(t);
  EXPECT_FALSE(t[0].engine->stats().in_flight.has_value()) << "close settles the round in flight";
  expect_identical(t);
}

}  // namespace
}  // namespace longhaul::sync::testing
