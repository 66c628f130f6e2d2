#include "sync/round_deadline.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace longhaul::sync {
namespace {

// The median of `v` (not empty), which it reorders: the mean of the middle two for an even count.
double median(std::vector<double>& v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2.0;
}

}  // namespace

void RoundDeadline::add(float sample_ms) {
  if (!std::isfinite(sample_ms) || sample_ms <= 0.0f) return;
  window_[next_] = sample_ms;
  next_ = (next_ + 1) % kWindow;
  count_ = std::min(count_ + 1, kWindow);
}

std::chrono::milliseconds RoundDeadline::deadline() const {
  if (cap_.count() <= 0 || count_ < kMinSamples) return cap_;
  std::vector<double> v(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(count_));
  const double m = median(v);
  for (double& x : v) x = std::abs(x - m);
  const double mad = median(v);
  const double ms = std::ceil(m + std::max(4.0 * mad, m / 2.0));
  // The cap wins over the floor: a user's deadline below a second stays what it was.
  const double floored = std::max(ms, static_cast<double>(kFloor.count()));
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::min(floored, static_cast<double>(cap_.count()))));
}

}  // namespace longhaul::sync
