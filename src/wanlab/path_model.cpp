#include "wanlab/path_model.hpp"

#include <algorithm>

namespace longhaul::wanlab {
namespace {

Nanos ms_to_ns(double ms) {
  return static_cast<Nanos>(ms * 1e6);
}

Nanos serialisation_ns(uint64_t wire_bytes, double rate_mbit) {
  return static_cast<Nanos>(static_cast<double>(wire_bytes) * 8e3 / rate_mbit);
}

}  // namespace

bool PathModel::would_overflow(Nanos now, uint64_t wire_bytes) const {
  if (shape_.rate_mbit <= 0) return false;
  const Nanos wait = std::max(now, link_free_at_) - now;
  return wait + serialisation_ns(wire_bytes, shape_.rate_mbit) > ms_to_ns(shape_.queue_ms);
}

bool PathModel::draw_loss() {
  if (shape_.loss <= 0) return false;
  const bool lost = std::uniform_real_distribution<double>(0, 1)(rng_) < shape_.loss;
  counters_.lost += lost ? 1 : 0;
  return lost;
}

std::optional<Nanos> PathModel::admit(Nanos now, uint64_t wire_bytes, uint64_t segments) {
  counters_.packets += segments;
  counters_.bytes += wire_bytes;
  if (blackhole_) {
    counters_.blackholed += segments;
    return std::nullopt;
  }
  Nanos departs = now;
  if (shape_.rate_mbit > 0) {
    // A drop-tail queue in front of a link of rate_mbit: a packet that would wait longer than
    // queue_ms is dropped, as a router's full buffer drops it.
    const Nanos start = std::max(now, link_free_at_);
    if (start - now > ms_to_ns(shape_.queue_ms)) {
      counters_.queue_dropped += segments;
      return std::nullopt;
    }
    link_free_at_ =
        start + static_cast<Nanos>(static_cast<double>(wire_bytes) * 8e3 / shape_.rate_mbit);
    departs = link_free_at_;
  }
  Nanos delay = ms_to_ns(shape_.latency_ms);
  if (shape_.jitter_ms > 0)
    delay +=
        ms_to_ns(std::uniform_real_distribution<double>(-shape_.jitter_ms, shape_.jitter_ms)(rng_));
  Nanos delivery = std::max({departs + std::max<Nanos>(delay, 0), last_delivery_, now});
  last_delivery_ = delivery;
  if (shape_.reorder > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < shape_.reorder)
    delivery += ms_to_ns(shape_.reorder_ms);  // held back; the ones behind it overtake it
  return delivery;
}

}  // namespace longhaul::wanlab
