// One direction of one path: when each packet that enters it leaves, or that it is dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

#include "wanlab/path_shape.hpp"

namespace longhaul::wanlab {

using Nanos = int64_t;  // CLOCK_MONOTONIC nanoseconds

struct PathCounters {
  uint64_t packets = 0;        // wire packets (MSS segments) that entered
  uint64_t bytes = 0;          // their wire bytes
  uint64_t lost = 0;           // dropped by the random loss
  uint64_t queue_dropped = 0;  // dropped because the bottleneck's queue was full
  uint64_t blackholed = 0;     // dropped during a black hole
};

class PathModel {
 public:
  PathModel(const PathShape& shape, uint64_t seed) : shape_(shape), rng_(seed) {}

  const PathShape& shape() const { return shape_; }
  void set_shape(const PathShape& shape) { shape_ = shape; }
  void set_blackhole(bool on) { blackhole_ = on; }
  bool blackhole() const { return blackhole_; }
  const PathCounters& counters() const { return counters_; }

  // Whether a packet of `wire_bytes` entering at `now` would find the bottleneck's queue too full
  // to take all of it (a router takes the wire packets of a burst one by one until it is full).
  bool would_overflow(Nanos now, uint64_t wire_bytes) const;
  // Whether one wire packet is lost on the line (a draw of the loss rate); counted.
  bool draw_loss();
  // The delivery time of a packet of `wire_bytes` carrying `segments` wire packets that enters at
  // `now`, or nullopt when it is dropped (black hole, full queue). Order is kept: a packet never
  // leaves before one that entered earlier, except one picked for reordering.
  std::optional<Nanos> admit(Nanos now, uint64_t wire_bytes, uint64_t segments);

 private:
  PathShape shape_;
  std::mt19937_64 rng_;
  bool blackhole_ = false;
  Nanos link_free_at_ = 0;   // when the bottleneck finishes serialising what it has
  Nanos last_delivery_ = 0;  // the in-order floor for the next packet
  PathCounters counters_;
};

}  // namespace longhaul::wanlab
