// When a chunk read from one side may be delivered to the other: one-way latency plus jitter from
// a seeded generator, never earlier than the chunk before it. TCP is a byte stream, so jitter may
// bunch chunks up but must not reorder them.
#pragma once

#include <chrono>
#include <cstdint>

#include "wanem/link_shape.hpp"

namespace longhaul::wanem {

class DelayModel {
 public:
  using Clock = std::chrono::steady_clock;

  // The same seed gives the same sequence of delays (for reproducible experiments).
  explicit DelayModel(uint64_t seed) : state_(seed) {}

  // Delivery time of a chunk read at `now`: now + latency + uniform(-jitter, +jitter), at least
  // `now` and at least the previous chunk's delivery time.
  Clock::time_point release_time(Clock::time_point now, const LinkShape& shape);

 private:
  double next_unit();  // uniform in [0, 1)

  uint64_t state_;
  Clock::time_point last_release_{};
};

// splitmix64 step: a well-mixed 64-bit value from a counter (also used to derive per-flow seeds).
uint64_t mix64(uint64_t x);

}  // namespace longhaul::wanem
