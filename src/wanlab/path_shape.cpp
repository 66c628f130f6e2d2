#include "wanlab/path_shape.hpp"

#include <fmt/format.h>

#include "common/parse_number.hpp"

namespace longhaul::wanlab {
namespace {

constexpr double kMaxDelayMs = 60'000;  // a minute of one-way delay is a typo
constexpr double kMaxRateMbit = 1'000'000;

Status parse_field(std::string_view key, std::string_view text, double max, double* out) {
  if (!parse_double(text, 0, max, out))
    return invalid_argument(fmt::format("{} needs a number in 0..{:g}, got '{}'", key, max, text));
  return Status::ok();
}

}  // namespace

Status set_path_field(PathShape* s, std::string_view key, std::string_view value) {
  if (key == "latency_ms") return parse_field(key, value, kMaxDelayMs, &s->latency_ms);
  if (key == "jitter_ms") return parse_field(key, value, kMaxDelayMs, &s->jitter_ms);
  if (key == "loss") return parse_field(key, value, 1, &s->loss);
  if (key == "reorder") return parse_field(key, value, 1, &s->reorder);
  if (key == "reorder_ms") return parse_field(key, value, kMaxDelayMs, &s->reorder_ms);
  if (key == "rate_mbit") return parse_field(key, value, kMaxRateMbit, &s->rate_mbit);
  if (key == "queue_ms") return parse_field(key, value, kMaxDelayMs, &s->queue_ms);
  return invalid_argument(
      fmt::format("unknown path setting '{}' (known: latency_ms, jitter_ms, loss, reorder, "
                  "reorder_ms, rate_mbit, queue_ms)",
                  key));
}

std::string describe(const PathShape& s) {
  return fmt::format(
      "latency_ms={:g} jitter_ms={:g} loss={:g} reorder={:g} reorder_ms={:g} rate_mbit={:g} "
      "queue_ms={:g}",
      s.latency_ms, s.jitter_ms, s.loss, s.reorder, s.reorder_ms, s.rate_mbit, s.queue_ms);
}

}  // namespace longhaul::wanlab
