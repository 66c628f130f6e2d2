#include "wanem/rate_limiter.hpp"

#include <algorithm>

namespace longhaul::wanem {
namespace {

// How far a sender may run ahead of the cap after an idle spell, and so how much a sender woken
// late (a busy machine) may catch up: small beside a measurement of a second or more, large
// enough that the emulator's own scheduling delays do not cut the rate below the cap.
constexpr auto kBurst = std::chrono::milliseconds(20);
constexpr size_t kMaxPiece = 64 * 1024;
constexpr size_t kMinPiece = 1024;

}  // namespace

void RateLimiter::set_rate(double bytes_per_second) {
  rate_ = std::max(0.0, bytes_per_second);
}

RateLimiter::Clock::time_point RateLimiter::reserve(size_t bytes, Clock::time_point now) {
  if (rate_ <= 0) return now;
  // An idle link does not bank more than the burst.
  free_at_ = std::max(free_at_, now - std::chrono::duration_cast<Clock::duration>(kBurst));
  const Clock::time_point start = free_at_;
  free_at_ += std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / rate_));
  // The bytes may leave once the link has sent what was reserved before them.
  return std::max(now, start);
}

size_t RateLimiter::piece_bytes() const {
  if (rate_ <= 0) return kMaxPiece;
  return std::clamp(static_cast<size_t>(rate_ * 0.002), kMinPiece, kMaxPiece);
}

}  // namespace longhaul::wanem
