// What the packet lab does to the IP packets on one path (one direction between two sites).
#pragma once

#include <string>
#include <string_view>

#include "common/status.hpp"

namespace longhaul::wanlab {

// Zero means "none" for every field but queue_ms. Keys match longhaul-wanem's proxy routes where
// they mean the same (latency_ms, jitter_ms, rate_mbit).
struct PathShape {
  double latency_ms = 0;  // one-way delay added to every packet
  double jitter_ms = 0;   // each packet's delay varies uniformly by ±jitter_ms; order is kept
  double loss = 0;        // probability that one wire packet (one MSS segment) is dropped
  double reorder = 0;     // probability that a packet is held back reorder_ms (overtaken)
  double reorder_ms = 1;  // how long a reordered packet is held back
  double rate_mbit = 0;   // serialisation rate of the path (a bottleneck link); 0: none
  double queue_ms = 50;   // the bottleneck's drop-tail queue, in time at rate_mbit
};

// Sets one field by its name from a decimal text; refuses unknown keys and values out of range.
Status set_path_field(PathShape* shape, std::string_view key, std::string_view value);

// "latency_ms=50 jitter_ms=0 loss=0.0001 ..." (for the stats answer and logs).
std::string describe(const PathShape& shape);

}  // namespace longhaul::wanlab
