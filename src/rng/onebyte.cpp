// The one-byte projected-gradient code and its scale rule (onebyte.hpp). Scalar code built once:
// a handful of values per step, and every operation is exact or a single IEEE operation.
#include "rng/onebyte.hpp"

#include <bit>
#include <cmath>
#include <string>

#include "quant/fp_env.hpp"

namespace longhaul::rng {
namespace {

// 2^e as f32 bits, for a normal exponent (|e| <= 126).
float power_of_two(int e) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23);
}

// Needs the default FP environment (round to nearest even), which the callers hold.
std::int8_t encode_one(float g, float inverse_scale) {
  // Exact unless g / scale underflows, which rounds to a code of 0 anyway.
  float x = g * inverse_scale;
  if (x > static_cast<float>(kOneByteMaxCode)) x = kOneByteMaxCode;
  if (x < -static_cast<float>(kOneByteMaxCode)) x = -kOneByteMaxCode;
  return static_cast<std::int8_t>(std::nearbyint(x));
}

Status not_finite(std::size_t index, float g) {
  return invalid_argument("encode_projected_gradient: value " + std::to_string(index) + " (" +
                          std::to_string(g) + ") is not finite");
}

}  // namespace

Result<OneByteScale> OneByteScale::start(int initial_exponent) {
  if (initial_exponent < kMinExponent || initial_exponent > kMaxExponent) {
    return invalid_argument("OneByteScale: initial exponent " + std::to_string(initial_exponent) +
                            " outside [-120, 120]");
  }
  return OneByteScale(initial_exponent);
}

float OneByteScale::scale() const {
  return power_of_two(exponent_);
}
float OneByteScale::inverse_scale() const {
  return power_of_two(-exponent_);
}

Status OneByteScale::observe(std::span<const std::int8_t> accepted_codes) {
  int largest = 0;
  for (std::size_t i = 0; i < accepted_codes.size(); ++i) {
    const int q = accepted_codes[i];
    if (q == kOneByteRefusedCode) {
      return invalid_argument("OneByteScale::observe: code " + std::to_string(i) +
                              " is -128, which decode refuses");
    }
    largest = std::abs(q) > largest ? std::abs(q) : largest;
  }
  if (accepted_codes.empty()) return Status::ok();
  if (largest == kOneByteMaxCode && exponent_ < kMaxExponent) ++exponent_;
  if (largest <= kOneByteMaxCode / 2 && exponent_ > kMinExponent) --exponent_;
  return Status::ok();
}

Result<std::int8_t> encode_projected_gradient(float g, const OneByteScale& scale) {
  if (!std::isfinite(g)) return not_finite(0, g);
  quant::ScopedDefaultFpEnv fp_env;
  return encode_one(g, scale.inverse_scale());
}

Status encode_projected_gradients(std::span<const float> g, const OneByteScale& scale,
                                  std::span<std::int8_t> out) {
  if (out.size() != g.size()) {
    return invalid_argument("encode_projected_gradients: " + std::to_string(g.size()) +
                            " values, room for " + std::to_string(out.size()));
  }
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!std::isfinite(g[i])) return not_finite(i, g[i]);
  quant::ScopedDefaultFpEnv fp_env;
  const float inverse = scale.inverse_scale();
  for (std::size_t i = 0; i < g.size(); ++i) out[i] = encode_one(g[i], inverse);
  return Status::ok();
}

Status decode_projected_gradients(std::span<const std::int8_t> codes, const OneByteScale& scale,
                                  std::span<float> out) {
  if (out.size() != codes.size()) {
    return invalid_argument("decode_projected_gradients: " + std::to_string(codes.size()) +
                            " codes, room for " + std::to_string(out.size()));
  }
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] == kOneByteRefusedCode) {
      return protocol_error("decode_projected_gradients: contributor " + std::to_string(i) +
                            " sent -128, which the one-byte code never produces");
    }
  }
  const float s = scale.scale();
  for (std::size_t i = 0; i < codes.size(); ++i) out[i] = static_cast<float>(codes[i]) * s;
  return Status::ok();
}

}  // namespace longhaul::rng
