// Conversions between f32 and the two 16-bit float formats, written in integer arithmetic plus one
// exact float addition so that (a) they round to nearest, ties to even, on every machine whatever
// the CPU offers (no dependence on F16C or AVX512-FP16) and (b) loops calling them auto-vectorize:
// every branch is a select between values computed unconditionally.
//
// The casts are __builtin_bit_cast rather than std::bit_cast, a template whose out-of-line copies
// would be shared between the ISA builds (isa_namespace.hpp).
//
// NaN handling: f16 <- f32 maps every NaN to the canonical quiet NaN 0x7E00 (sign kept);
// bf16 <- f32 keeps the sign and upper payload bits and sets the quiet bit. f32 <- f16/bf16 is
// exact (NaN payloads are kept).
#pragma once

#include "quant/isa_namespace.hpp"

#include <cstdint>

namespace longhaul::quant {

inline namespace LH_QUANT_ISA_NS {

inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7FFFu;
  const std::uint32_t shifted = em << 13;           // exponent and mantissa in f32 position
  const std::uint32_t exp = shifted & 0x0F800000u;  // the f16 exponent field, shifted
  const std::uint32_t normal = shifted + ((127u - 15u) << 23);
  // Inf/NaN: move the all-ones exponent to f32's all-ones exponent.
  const std::uint32_t special = normal + ((128u - 16u) << 23);
  // Zero/subnormal: m * 2^-24, computed exactly as (2^-14 * (1 + m/1024)) - 2^-14.
  const float sub =
      __builtin_bit_cast(float, normal + (1u << 23)) - __builtin_bit_cast(float, 113u << 23);
  const std::uint32_t subnormal = __builtin_bit_cast(std::uint32_t, sub);
  std::uint32_t o = exp == 0x0F800000u ? special : normal;
  o = exp == 0 ? subnormal : o;
  return __builtin_bit_cast(float, o | sign);
}

inline std::uint16_t f32_to_f16(float f) {
  std::uint32_t u = __builtin_bit_cast(std::uint32_t, f);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  // |f| >= 65536 (or Inf/NaN): Inf, or the quiet NaN. 65520 <= |f| < 65536 reaches Inf through
  // the rounding carry of the normal path.
  const std::uint32_t big = u > 0x7F800000u ? 0x7E00u : 0x7C00u;
  // |f| < 2^-14: the result is subnormal or zero. Adding 0.5 puts f16's subnormal ulp (2^-24) at
  // f32's last mantissa bit, so the float addition rounds to nearest-even for us.
  const float magic = __builtin_bit_cast(float, 126u << 23);  // 0.5
  const std::uint32_t sub =
      __builtin_bit_cast(std::uint32_t, __builtin_bit_cast(float, u) + magic) -
      __builtin_bit_cast(std::uint32_t, magic);
  // Normal: rebias the exponent, add 0x0FFF plus the lowest kept bit (ties to even), truncate.
  const std::uint32_t odd = (u >> 13) & 1u;
  const std::uint32_t normal = (u - ((127u - 15u) << 23) + 0x0FFFu + odd) >> 13;
  std::uint32_t r = u < (113u << 23) ? sub : normal;
  r = u >= (143u << 23) ? big : r;
  return static_cast<std::uint16_t>(r | (sign >> 16));
}

inline float bf16_to_f32(std::uint16_t b) {
  return __builtin_bit_cast(float, static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = __builtin_bit_cast(std::uint32_t, f);
  // Round to nearest even on the 16 bits dropped; a carry into the exponent is the right answer
  // (up to Inf for values past bf16's largest finite).
  const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (u >> 16) | 0x0040u;
  const bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<std::uint16_t>(is_nan ? quiet_nan : rounded);
}

}  // namespace LH_QUANT_ISA_NS

}  // namespace longhaul::quant
