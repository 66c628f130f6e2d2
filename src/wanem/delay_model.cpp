#include "wanem/delay_model.hpp"

#include <algorithm>

namespace longhaul::wanem {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double DelayModel::next_unit() {
  state_ = mix64(state_);
  return static_cast<double>(state_ >> 11) * 0x1.0p-53;
}

DelayModel::Clock::time_point DelayModel::release_time(Clock::time_point now,
                                                       const LinkShape& shape) {
  double delay_ms = shape.latency_ms;
  if (shape.jitter_ms > 0) delay_ms += (2 * next_unit() - 1) * shape.jitter_ms;
  const auto delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(std::max(0.0, delay_ms)));
  last_release_ = std::max(last_release_, now + delay);
  return last_release_;
}

}  // namespace longhaul::wanem
