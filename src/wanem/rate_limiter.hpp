// A bandwidth cap as a token bucket in its "virtual finish time" form (GCRA): each caller reserves
// the bytes it is about to send and is told when it may send them. Reservations are served in the
// order they were made, so connections that each reserve one piece at a time share the cap
// round-robin, i.e. fairly.
#pragma once

#include <chrono>
#include <cstddef>

namespace longhaul::wanem {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // bytes_per_second == 0: no cap.
  void set_rate(double bytes_per_second);
  bool limited() const { return rate_ > 0; }

  // Reserves `bytes` of capacity; returns the time at which they may go out (>= now).
  Clock::time_point reserve(size_t bytes, Clock::time_point now);

  // The largest piece a sender should reserve at once: about 2 ms of the cap (so waits are short
  // and sharing is fine-grained), between 1 KiB and 64 KiB; 64 KiB when there is no cap.
  size_t piece_bytes() const;

 private:
  double rate_ = 0;            // bytes per second; 0 = unlimited
  Clock::time_point free_at_;  // when everything reserved so far has been sent
};

}  // namespace longhaul::wanem
