// What a route's emulated WAN path does to the bytes crossing it, in each direction.
#pragma once

#include <string>
#include <string_view>

#include "common/status.hpp"

namespace longhaul::wanem {

// Every field applies to each direction on its own (the path is full duplex). Zero means "none":
// no added latency, no jitter, no rate cap.
struct LinkShape {
  double latency_ms = 0;      // one-way delay added to every chunk
  double jitter_ms = 0;       // each chunk's delay varies uniformly by ±jitter_ms (order is kept)
  double rate_mbit = 0;       // cap of the route as a whole (all its connections share it fairly)
  double conn_rate_mbit = 0;  // cap of each single connection
};

// Sets one field by its name (latency_ms, jitter_ms, rate_mbit, conn_rate_mbit) from a decimal
// text. Refuses unknown keys, non-numbers, negatives and absurd values with a message naming them.
Status set_shape_field(LinkShape* shape, std::string_view key, std::string_view value);

// "latency_ms=40 jitter_ms=5 rate_mbit=0 conn_rate_mbit=0" (for logs and the stats answer).
std::string describe(const LinkShape& shape);

}  // namespace longhaul::wanem
