// longhaul-train's timeline files (tools/longhaul-train/timeline.hpp) from the engine's figures
// after each step: what each fragment's column says (L launched, A applied, D dropped, then n on
// the network or r ready), the rounds file's rows, data-parallel rows without an engine; and the
// progress line's blocked share over the last steps (progress.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "progress.hpp"
#include "timeline.hpp"

namespace longhaul::train::cli {
namespace {

namespace fs = std::filesystem;
using Clock = Timeline::Clock;

// A fresh output directory, removed at the end.
struct TempDir {
  TempDir() {
    path = (fs::temp_directory_path() /
            ("lh-timeline-" + std::to_string(getpid()) + "-" + std::to_string(counter++)))
               .string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string read(const std::string& name) const {
    std::ifstream in(path + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string path;
  static inline int counter = 0;
};

// A clock origin and a time `ms` after it, as the engine's stats give times (steady ns); -1: a
// time the engine did not measure (0).
const Clock::time_point kOrigin = Clock::now();
std::uint64_t at_ms(int ms) {
  if (ms < 0) return 0;
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (kOrigin + std::chrono::milliseconds(ms)).time_since_epoch())
          .count());
}

lh_sync_stats idle(std::uint32_t tau = 1) {
  lh_sync_stats s{};
  s.delay = tau;
  return s;
}

lh_sync_stats in_flight(lh_sync_stats s, std::uint32_t fragment, std::uint64_t round,
                        int launched_ms, int ready_ms = -1) {
  s.in_flight = 1;
  s.in_flight_fragment = fragment;
  s.in_flight_round = round;
  s.in_flight_launched_ns = at_ms(launched_ms);
  s.in_flight_ready = ready_ms >= 0 ? 1 : 0;
  s.in_flight_ready_ns = at_ms(ready_ms);
  return s;
}

// `s` with one more round settled (the counters are cumulative, as the engine's), none in flight.
lh_sync_stats settled(lh_sync_stats s, std::uint32_t fragment, std::uint64_t round, bool applied,
                      int launched_ms, int ready_ms) {
  (applied ? s.rounds_applied : s.rounds_dropped)++;
  s.last_fragment = fragment;
  s.last_round = round;
  s.last_applied = applied ? 1 : 0;
  s.last_launched_ns = at_ms(launched_ms);
  s.last_ready_ns = at_ms(ready_ms);
  s.in_flight = 0;
  return s;
}

// Step t began at t·100 ms and took 10 ms, `blocked_ms` of them in the engine.
StepTiming timing(std::int64_t step, double blocked_ms = 1) {
  return {step, 0.1 * static_cast<double>(step), 0.010, blocked_ms / 1e3};
}

TEST(trainTimeline, ABlockingRoundIsLaunchedAndAppliedInOneStep) {
  TempDir dir;
  auto t = Timeline::open(dir.path, false, 1u, kOrigin);
  ASSERT_TRUE(t) << t.status().to_string();
  t->begin(idle(0));
  t->record(timing(1), idle(0));
  t->record(timing(2, 4), settled(idle(0), 0, 1, true, 201, 203));
  t->flush();
  EXPECT_EQ(dir.read("timeline.csv"),
            "step,start_s,compute_s,blocked_s,tau,tau_needed,f0\n"
            "1,0.100000,0.009000,0.001000,0,0,\n"
            "2,0.200000,0.006000,0.004000,0,0,LA\n");
  EXPECT_EQ(dir.read("timeline_rounds.csv"),
            "fragment,round,launch_step,settle_step,launched_s,ready_s,applied\n"
            "0,1,2,2,0.201000,0.203000,1\n");
}

TEST(trainTimeline, AnOverlappedRoundIsOnTheNetworkThenReadyThenApplied) {
  TempDir dir;
  auto t = Timeline::open(dir.path, false, 2u, kOrigin);
  ASSERT_TRUE(t) << t.status().to_string();
  t->begin(idle());
  t->record(timing(4), in_flight(idle(), 0, 1, 405));
  t->record(timing(5), in_flight(idle(), 0, 1, 405, 450));
  // Step 6 applies fragment 0's round and launches fragment 1's; step 7 drops that one.
  const lh_sync_stats six = in_flight(settled(idle(), 0, 1, true, 405, 450), 1, 1, 607);
  t->record(timing(6), six);
  t->record(timing(7), settled(six, 1, 1, false, 607, -1));
  t->flush();
  EXPECT_EQ(dir.read("timeline.csv"),
            "step,start_s,compute_s,blocked_s,tau,tau_needed,f0,f1\n"
            "4,0.400000,0.009000,0.001000,1,0,Ln,\n"
            "5,0.500000,0.009000,0.001000,1,0,r,\n"
            "6,0.600000,0.009000,0.001000,1,0,A,Ln\n"
            "7,0.700000,0.009000,0.001000,1,0,,D\n");
  // A time the engine did not measure (a dropped round's ready time here) is left empty.
  EXPECT_EQ(dir.read("timeline_rounds.csv"),
            "fragment,round,launch_step,settle_step,launched_s,ready_s,applied\n"
            "0,1,4,6,0.405000,0.450000,1\n"
            "1,1,6,7,0.607000,,0\n");
}

TEST(trainTimeline, TwoRoundsSettledInOneStepBothGetTheirRows) {
  TempDir dir;
  auto t = Timeline::open(dir.path, false, 2u, kOrigin);
  ASSERT_TRUE(t) << t.status().to_string();
  t->begin(idle());
  t->record(timing(1), in_flight(idle(), 0, 1, 105, 150));
  // The round in flight was applied, then fragment 1's blocking round launched and dropped.
  lh_sync_stats now = settled(idle(), 0, 1, true, 105, 150);
  now = settled(now, 1, 1, false, 210, 220);
  t->record(timing(2), now);
  t->flush();
  EXPECT_NE(dir.read("timeline.csv").find("\n2,0.200000,0.009000,0.001000,1,0,A,LD\n"),
            std::string::npos)
      << dir.read("timeline.csv");
  EXPECT_EQ(dir.read("timeline_rounds.csv"),
            "fragment,round,launch_step,settle_step,launched_s,ready_s,applied\n"
            "0,1,1,2,0.105000,0.150000,1\n"
            "1,1,2,2,0.210000,0.220000,0\n");
}

TEST(trainTimeline, TheCloseSettlesTheLastRoundIntoTheRoundsFile) {
  TempDir dir;
  auto t = Timeline::open(dir.path, false, 1u, kOrigin);
  ASSERT_TRUE(t) << t.status().to_string();
  t->begin(idle());
  t->record(timing(3), in_flight(idle(), 0, 1, 305));
  t->finish(3, settled(idle(), 0, 1, true, 305, 330));
  t->flush();
  EXPECT_EQ(dir.read("timeline_rounds.csv"),
            "fragment,round,launch_step,settle_step,launched_s,ready_s,applied\n"
            "0,1,3,3,0.305000,0.330000,1\n");
}

TEST(trainTimeline, DataParallelRowsHaveNoTauNoFragmentsAndNoRoundsFile) {
  TempDir dir;
  auto t = Timeline::open(dir.path, false, std::nullopt, kOrigin);
  ASSERT_TRUE(t) << t.status().to_string();
  t->begin(std::nullopt);
  t->record(timing(1, 3), std::nullopt);
  t->flush();
  EXPECT_EQ(dir.read("timeline.csv"),
            "step,start_s,compute_s,blocked_s,tau,tau_needed\n"
            "1,0.100000,0.007000,0.003000,,\n");
  EXPECT_FALSE(fs::exists(dir.path + "/timeline_rounds.csv"));
}

TEST(trainTimeline, AResumedRunAppendsWithoutASecondHeader) {
  TempDir dir;
  {
    auto t = Timeline::open(dir.path, false, std::nullopt, kOrigin);
    ASSERT_TRUE(t);
    t->record(timing(1), std::nullopt);
  }
  auto t = Timeline::open(dir.path, true, std::nullopt, kOrigin);
  ASSERT_TRUE(t);
  t->record(timing(2), std::nullopt);
  t->flush();
  EXPECT_EQ(dir.read("timeline.csv"),
            "step,start_s,compute_s,blocked_s,tau,tau_needed\n"
            "1,0.100000,0.009000,0.001000,,\n"
            "2,0.200000,0.009000,0.001000,,\n");
}

TEST(trainTimeline, AnUnwritableDirectoryIsAnError) {
  auto t = Timeline::open("/nonexistent-dir/for/a/timeline", false, 1u, kOrigin);
  EXPECT_FALSE(t);
}

TEST(trainProgress, TheBlockedShareCoversOnlyTheLastSteps) {
  BlockedWindow w;
  EXPECT_FALSE(w.fraction());
  for (std::size_t i = 0; i < BlockedWindow::kSteps; ++i) w.add(1.0, 1.0);  // all blocked
  EXPECT_DOUBLE_EQ(*w.fraction(), 1.0);
  for (std::size_t i = 0; i < BlockedWindow::kSteps / 2; ++i) w.add(1.0, 0.0);
  EXPECT_DOUBLE_EQ(*w.fraction(), 0.5);
  for (std::size_t i = 0; i < BlockedWindow::kSteps; ++i) w.add(2.0, 0.5);
  EXPECT_DOUBLE_EQ(*w.fraction(), 0.25);  // the blocked steps have left the window
}

}  // namespace
}  // namespace longhaul::train::cli
