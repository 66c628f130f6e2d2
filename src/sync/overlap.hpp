// Sizing the overlap (docs/overlap.md): how many inner steps a round may stay in flight (τ) so
// that its result is there before the step that applies it, within the user's staleness bound.
//
// Each member measures, per round, the wall time from its launch to its result being ready, and
// the time its trainer spends computing one step (between the engine's calls). It reports what it
// measured in the masks of the next round it launches (two floats per ring position, beside the
// contribution masks: no extra message), so every member that applies that round reads the same
// reports. The group keeps the largest number of steps any member needed over a cycle of H steps
// (shared state) and, at the next admission point, takes τ from it for the following cycle: a
// deterministic function of values every member holds bit for bit, applied at a step every member
// computes the same.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

namespace longhaul::sync {

// What one member reports about the last round it finished: the steps it needed (0: nothing
// measured) and its sync time, in milliseconds, for the stats.
struct OverlapReport {
  uint32_t steps_needed = 0;
  float sync_ms = 0.0f;
};

// The floats of a round's mask that carry the reports: two per ring position.
inline constexpr size_t kOverlapSlots = 2;

// The smallest number of steps, of `step` each, that covers `sync` plus `margin` (a fraction of
// it): ceil(sync · (1 + margin) / step), at least 1. 0 when nothing was measured (`step` 0).
uint32_t steps_needed(std::chrono::nanoseconds sync, std::chrono::nanoseconds step, float margin);

// This member's section of the mask (kOverlapSlots · members floats): zeros but its own report.
void write_report(std::span<float> section, size_t rank, OverlapReport report);

// The group's reports, read from the summed section: the most steps any member needed (0: none
// reported), the slowest sync time reported and the fastest (0: none; the sample an adaptive
// round deadline takes, round_deadline.hpp).
struct GroupReport {
  uint32_t steps_needed = 0;
  float slowest_sync_ms = 0.0f;
  float fastest_sync_ms = 0.0f;
};
GroupReport read_reports(std::span<const float> summed_section);

// τ for the next cycle: `needed` (the most steps any member needed over the last cycle) within
// [1, cap] (0 when cap is 0); `current` when nothing was measured (`needed` 0: every round dropped,
// or none ran).
uint32_t next_delay(uint32_t needed, uint32_t current, uint32_t cap);

// The compute time of one inner step, as this member's trainer spends it between the engine's
// calls: an exponentially weighted mean (weight 1/4 on the newest step), so that one slow step
// moves it a little and a lasting change within a few steps. Time spent inside the engine (its
// waits included) is not compute: a round that blocks must not make the steps look longer.
class StepClock {
 public:
  using Clock = std::chrono::steady_clock;
  // The trainer calls the engine at `now` (its step's compute has ended).
  void enter(Clock::time_point now);
  // The engine returns to the trainer at `now`.
  void leave(Clock::time_point now) { left_at_ = now; }
  // 0 until one whole step was timed.
  std::chrono::nanoseconds step() const { return step_; }

 private:
  Clock::time_point left_at_{};
  std::chrono::nanoseconds step_{0};
};

}  // namespace longhaul::sync
