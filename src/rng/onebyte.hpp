// The one-byte code of SPSA's projected gradient (issue 52): each peer sends, per perturbation,
// q = clamp(round(g / scale), -127, 127) as a signed byte, and every peer decodes g^ = q * scale.
//
// The scale is 2^e, agreed without a message: every peer starts from the same initial exponent
// (a run option) and moves it after every step by the same rule on the same data, the codes of
// that step that every peer accepted (OneByteScale::observe):
//   - some |q| == 127 (a value may have been clipped): e + 1, twice the range;
//   - every |q| <= 63 (all would still fit at twice the resolution): e - 1;
//   - otherwise, or no code at all: e unchanged;
// then clamped to [-120, 120]. Integers only, and max/any do not depend on the order the codes
// arrived in, so every peer computes the same e. After a halving the same values give codes of at
// most 126, so the rule does not oscillate on a steady distribution. A peer that joins receives e
// with theta (the engine's state sync carries it).
//
// A power-of-two scale makes decoding exact: q has at most 7 significant bits and 2^e is normal
// for |e| <= 120, so q * 2^e is an f32 with no rounding, the same on every peer.
// -128 is never produced; a byte of -128 is refused when decoding, naming its contributor.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.hpp"

namespace longhaul::rng {

inline constexpr int kOneByteMaxCode = 127;
inline constexpr std::int8_t kOneByteRefusedCode = -128;

// The agreed scale 2^exponent and its update rule (above). Plain value; not thread-safe to
// observe() while another thread reads it.
class OneByteScale {
 public:
  static constexpr int kMinExponent = -120;
  static constexpr int kMaxExponent = 120;
  // g^ in [-127, 127]: a projected gradient (L(theta + eps z) - L(theta - eps z)) / (2 eps) of
  // order 1.
  static constexpr int kDefaultInitialExponent = 0;

  // LH_ERR_INVALID_ARGUMENT when initial_exponent is outside [kMinExponent, kMaxExponent].
  static Result<OneByteScale> start(int initial_exponent = kDefaultInitialExponent);

  int exponent() const { return exponent_; }
  float scale() const;          // 2^exponent, exactly
  float inverse_scale() const;  // 2^-exponent, exactly

  // Moves the exponent by the rule above from one step's accepted codes. LH_ERR_INVALID_ARGUMENT,
  // and no change, when a code is -128 (decode refuses those before they are accepted).
  Status observe(std::span<const std::int8_t> accepted_codes);

 private:
  explicit OneByteScale(int exponent) : exponent_(exponent) {}
  int exponent_;
};

// q = clamp(round_half_even(g / scale), -127, 127). LH_ERR_INVALID_ARGUMENT for a g that is not
// finite (a diverged loss: send nothing rather than a clipped lie).
Result<std::int8_t> encode_projected_gradient(float g, const OneByteScale& scale);

// The same for a batch: out[i] = encode(g[i]). LH_ERR_INVALID_ARGUMENT, naming the first index
// that is not finite, or for sizes that differ; nothing written then.
Status encode_projected_gradients(std::span<const float> g, const OneByteScale& scale,
                                  std::span<std::int8_t> out);

// out[i] = codes[i] * scale, exactly; codes[i] is contributor i's byte. LH_ERR_PROTOCOL naming
// the first contributor whose byte is -128, LH_ERR_INVALID_ARGUMENT for sizes that differ;
// nothing written then.
Status decode_projected_gradients(std::span<const std::int8_t> codes, const OneByteScale& scale,
                                  std::span<float> out);

}  // namespace longhaul::rng
