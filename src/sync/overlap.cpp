#include "sync/overlap.hpp"

#include <algorithm>
#include <cmath>

namespace longhaul::sync {
namespace {

// A report's step count travels as an f32: exact below 2^24, far above any τ.
constexpr double kMaxSteps = double{1 << 24} - 1.0;

}  // namespace

uint32_t steps_needed(std::chrono::nanoseconds sync, std::chrono::nanoseconds step, float margin) {
  if (step.count() <= 0) return 0;
  const double covered = static_cast<double>(std::max<int64_t>(sync.count(), 0)) *
                         (1.0 + static_cast<double>(margin)) / static_cast<double>(step.count());
  // Less a millionth of a step: a margin such as 0.2f is a hair above 0.2, and must not add a
  // step to a sync that is an exact number of them.
  return static_cast<uint32_t>(std::clamp(std::ceil(covered - 1e-6), 1.0, kMaxSteps));
}

void write_report(std::span<float> section, size_t rank, OverlapReport report) {
  std::fill(section.begin(), section.end(), 0.0f);
  const size_t members = section.size() / kOverlapSlots;
  section[rank] = static_cast<float>(std::min<double>(report.steps_needed, kMaxSteps));
  section[members + rank] = report.sync_ms;
}

GroupReport read_reports(std::span<const float> summed) {
  // Each slot is one member's value plus zeros: exact, the same on every member.
  GroupReport g;
  const size_t members = summed.size() / kOverlapSlots;
  for (size_t r = 0; r < members; ++r) {
    if (std::isfinite(summed[r]) && summed[r] > 0.0f)
      g.steps_needed = std::max(g.steps_needed, static_cast<uint32_t>(summed[r]));
    const float sync_ms = summed[members + r];
    if (!std::isfinite(sync_ms)) continue;
    g.slowest_sync_ms = std::max(g.slowest_sync_ms, sync_ms);
    if (sync_ms > 0.0f && (g.fastest_sync_ms == 0.0f || sync_ms < g.fastest_sync_ms))
      g.fastest_sync_ms = sync_ms;
  }
  return g;
}

uint32_t next_delay(uint32_t needed, uint32_t current, uint32_t cap) {
  if (needed == 0) return std::min(current, cap);
  return std::min(std::max(needed, 1u), cap);
}

void StepClock::enter(Clock::time_point now) {
  if (left_at_ == Clock::time_point{}) return;  // the first call: no step timed yet
  const auto compute = std::chrono::duration_cast<std::chrono::nanoseconds>(now - left_at_);
  step_ = step_.count() == 0 ? compute : (3 * step_ + compute) / 4;
}

}  // namespace longhaul::sync
