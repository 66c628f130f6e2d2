// Scalar reference conversions for the quant tests, written from the definitions (value search
// and ldexp), independently of the bit tricks in src/quant/half.hpp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace longhaul::quant::testing {

// The value of an f16 bit pattern, in double (exact).
inline double ref_f16_value(std::uint16_t h) {
  const int sign = (h >> 15) != 0 ? -1 : 1;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  if (exp == 0x1F) return mant != 0 ? std::nan("") : sign * HUGE_VAL;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);
  return sign * std::ldexp(static_cast<double>(1024 + mant), exp - 25);
}

// Rounds a float to the nearest f16, ties to the even pattern, by searching the positive finite
// patterns (their values increase with the pattern). NaN -> 0x7E00 with the sign.
inline std::uint16_t ref_f32_to_f16(float f) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return static_cast<std::uint16_t>(sign | 0x7E00);
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7C00);  // 65504 + half an ulp
  // Largest pattern with value <= a.
  std::uint32_t lo = 0;
  std::uint32_t hi = 0x7BFF;
  while (lo < hi) {
    const std::uint32_t mid = (lo + hi + 1) / 2;
    if (ref_f16_value(static_cast<std::uint16_t>(mid)) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  std::uint32_t best = lo;
  if (lo < 0x7BFF || a > 65504.0) {
    const double below = ref_f16_value(static_cast<std::uint16_t>(lo));
    const double above = lo == 0x7BFF ? 65536.0 : ref_f16_value(static_cast<std::uint16_t>(lo + 1));
    const double d_below = a - below;
    const double d_above = above - a;
    if (d_above < d_below || (d_above == d_below && (lo & 1) != 0)) best = lo + 1;
  }
  return static_cast<std::uint16_t>(sign | best);
}

inline double ref_bf16_value(std::uint16_t b) {
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
}

// Round to nearest even bf16 from the definition: compare the distances to the two neighbours.
inline std::uint16_t ref_f32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  const auto down = static_cast<std::uint16_t>(u >> 16);  // truncation toward zero
  if ((u & 0xFFFF) == 0) return down;
  const auto up = static_cast<std::uint16_t>(down + 1);  // next away from zero (maybe Inf)
  const double a = std::fabs(static_cast<double>(f));
  const double vd = std::fabs(ref_bf16_value(down));
  const double vu = (up & 0x7FFF) == 0x7F80 ? std::ldexp(1.0, 128) : std::fabs(ref_bf16_value(up));
  if (a - vd < vu - a) return down;
  if (a - vd > vu - a) return up;
  return (down & 1) != 0 ? up : down;
}

}  // namespace longhaul::quant::testing
