#include "wanem/link_shape.hpp"

#include <string>

#include <fmt/format.h>

#include "common/parse_number.hpp"

namespace longhaul::wanem {
namespace {

// A day of latency or a terabit of rate is a typo, not an experiment.
constexpr double kMaxDelayMs = 86'400'000;
constexpr double kMaxRateMbit = 1'000'000;

Status parse_number(std::string_view key, std::string_view text, double max, double* out) {
  if (!parse_double(text, 0, max, out))
    return invalid_argument(fmt::format("{} needs a number in 0..{}, got '{}'", key,
                                        static_cast<long long>(max), text));
  return Status::ok();
}

}  // namespace

Status set_shape_field(LinkShape* shape, std::string_view key, std::string_view value) {
  if (key == "latency_ms") return parse_number(key, value, kMaxDelayMs, &shape->latency_ms);
  if (key == "jitter_ms") return parse_number(key, value, kMaxDelayMs, &shape->jitter_ms);
  if (key == "rate_mbit") return parse_number(key, value, kMaxRateMbit, &shape->rate_mbit);
  if (key == "conn_rate_mbit")
    return parse_number(key, value, kMaxRateMbit, &shape->conn_rate_mbit);
  return invalid_argument(fmt::format(
      "unknown setting '{}' (known: latency_ms, jitter_ms, rate_mbit, conn_rate_mbit)", key));
}

std::string describe(const LinkShape& shape) {
  return fmt::format("latency_ms={:g} jitter_ms={:g} rate_mbit={:g} conn_rate_mbit={:g}",
                     shape.latency_ms, shape.jitter_ms, shape.rate_mbit, shape.conn_rate_mbit);
}

}  // namespace longhaul::wanem
