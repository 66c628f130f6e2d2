// The per-block and per-element arithmetic of the blockwise codecs (u8, u4, E3M0; codec.hpp has
// the format): one source for the CPU encoders (codec.cpp, e3m0.cpp) and the GPU kernels
// (src/gpu/codec_kernels.cu), so a GPU peer and a CPU peer write the same bytes.
//
// Every function is a fixed sequence of single IEEE operations or integer operations. That holds
// on the GPU only when the kernels are built as src/gpu builds them: --fmad=false (no contraction
// of (x - lo) * inv + kRound into an FMA), IEEE division (-prec-div=true, nvcc's default) and
// denormals kept (-ftz=false, the default). On the CPU the project builds with -ffp-contract=off
// and the quant entry points pin the FP environment (fp_env.hpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "quant/isa_namespace.hpp"

#if defined(__CUDACC__)
#define LH_BLOCK_FN __host__ __device__ __forceinline__
#else
#define LH_BLOCK_FN [[gnu::always_inline]] inline
#endif

namespace longhaul::quant::block {
inline namespace LH_QUANT_ISA_NS {

// 1.5 * 2^23: for 0 <= v <= 2^22, (v + kRound) - kRound is v rounded to the nearest integer,
// ties to even, because the sum's ulp is exactly 1.
inline constexpr float kRound = 12582912.0f;
inline constexpr std::uint32_t kQuietNan = 0x7FC00000u;
inline constexpr float kFloatMax = 3.40282346638528859811704183484516925e+38F;

LH_BLOCK_FN std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
LH_BLOCK_FN float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// ---- u8 / u4 (min-max) -------------------------------------------------------------------------

// A signed integer that orders floats as their values do (-0 < +0; NaNs beyond the infinities).
// Integer min/max reductions do not depend on the order elements are visited in (vector lanes,
// GPU threads), which float min/max with NaNs and signed zeros would.
LH_BLOCK_FN std::int32_t order_key(float x) {
  const auto s = static_cast<std::int32_t>(bits_of(x));
  return s ^ ((s >> 31) & 0x7FFFFFFF);
}
// The inverse of order_key (the transform is an involution).
LH_BLOCK_FN float key_to_float(std::int32_t k) {
  return float_of(static_cast<std::uint32_t>(k ^ ((k >> 31) & 0x7FFFFFFF)));
}
inline constexpr std::int32_t kKeyPosInf = 0x7F800000;                              // of +Inf
inline constexpr std::int32_t kKeyNegInf = static_cast<std::int32_t>(0x807FFFFFu);  // of -Inf

struct MinMaxParams {
  float lo;
  float scale;
  float inv;  // levels / range: the reciprocal of scale, or 0 when scale is 0
  bool finite;
};

// The header of a block whose smallest and largest order keys are kmin and kmax.
LH_BLOCK_FN MinMaxParams minmax_params(std::int32_t kmin, std::int32_t kmax, float levels) {
  const float nan = float_of(kQuietNan);
  if (kmax >= kKeyPosInf || kmin <= kKeyNegInf) return {nan, nan, 0.0f, false};
  const float lo = key_to_float(kmin);
  const float hi = key_to_float(kmax);
  const float range = hi - lo;
  // A range beyond FLT_MAX cannot be spanned by lo + q * scale in f32.
  if (!(range <= kFloatMax)) return {nan, nan, 0.0f, false};
  // Two independent divisions (they overlap in the pipeline) rather than 1 / (range / levels).
  const float scale = range / levels;
  const float inv = levels / range;
  // range 0 (all equal), or so small that levels / range overflows: the block is constant.
  if (!(inv <= kFloatMax)) return {lo, 0.0f, 0.0f, true};
  return {lo, scale, inv, true};
}

// Code of x in a finite block. There lo <= x <= hi and range <= FLT_MAX, so v = (x - lo) * inv is
// in [0, L * (1 + 2^-22)]: no NaN, nothing that overflows the int conversion, and only rounding
// slop can pass L, which the integer clamp removes.
template <std::int32_t kLevels>
LH_BLOCK_FN std::uint32_t quantize(float x, float lo, float inv) {
  const float v = (x - lo) * inv;
  const float r = (v + kRound) - kRound;
  const auto q = static_cast<std::int32_t>(r);
  return static_cast<std::uint32_t>(q < kLevels ? q : kLevels);
}

LH_BLOCK_FN float dequantize(std::uint32_t q, float lo, float scale) {
  return lo + static_cast<float>(q) * scale;
}

// ---- E3M0
// ---------------------------------------------------------------------------------------- e3m0.cpp
// explains why comparing |x|'s bits with thresholds rounded up to f32 is exact.

inline constexpr std::uint32_t kMagnitudeMask = 0x7FFFFFFFu;
inline constexpr std::uint32_t kExponentMask = 0x7F800000u;  // also the key of +Inf
inline constexpr std::uint32_t kNever = 0x80000000u;         // above every magnitude key
inline constexpr int kE3m0Thresholds = 7;

// The bits of |x|. For x not a NaN these order as the values |x| do.
LH_BLOCK_FN std::uint32_t magnitude_key(float x) {
  return bits_of(x) & kMagnitudeMask;
}

// The key of the smallest f32 >= t, for t in (0, FLT_MAX]. The conversion rounds to nearest, so
// it lands on that float or the one just below it; a nonnegative float's key plus 1 is the next
// float up.
LH_BLOCK_FN std::uint32_t ceil_key(double t) {
  const auto f = static_cast<float>(t);
  const std::uint32_t k = bits_of(f);
  return static_cast<double>(f) < t ? k + 1 : k;
}

// What the encoder needs of a block: the header A, and thresholds such that an element's exponent
// code e is the number of j with magnitude_key(x) >= threshold[j].
struct E3m0Encoding {
  float header;
  std::uint32_t threshold[kE3m0Thresholds];
};

// The encoding of a block whose largest magnitude key is max_key. The thresholds over A are
// A / 128 (between 0 and A / 64), then the midpoints 0.75 * 2^(e - 7), e = 2..7; in double they are
// exact products.
LH_BLOCK_FN E3m0Encoding e3m0_encoding(std::uint32_t max_key) {
  E3m0Encoding b{};
  if (max_key >= kExponentMask || max_key == 0) {
    // A NaN or +-Inf in the block, or all zeros: every code is 0.
    b.header = max_key == 0 ? 0.0f : float_of(kQuietNan);
    for (int j = 0; j < kE3m0Thresholds; ++j) b.threshold[j] = kNever;
    return b;
  }
  b.header = float_of(max_key);
  const auto a = static_cast<double>(b.header);
  b.threshold[0] = ceil_key(a * 0x1p-7);
  double factor = 0.75 * 0x1p-5;
  for (int j = 1; j < kE3m0Thresholds; ++j, factor *= 2.0) b.threshold[j] = ceil_key(a * factor);
  return b;
}

// The 4-bit code of x: the count of thresholds |x| reaches, and the sign of x unless that is 0.
LH_BLOCK_FN std::uint32_t e3m0_code(float x, const E3m0Encoding& b) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t k = u & kMagnitudeMask;
  std::uint32_t e = 0;
  for (int j = 0; j < kE3m0Thresholds; ++j) e += k >= b.threshold[j] ? 1u : 0u;
  const std::uint32_t negative = (u >> 31) & (e != 0 ? 1u : 0u);
  return e | (negative << 3);
}

// The value of code c in a block with header a: a times an exact power of two (rounded to nearest
// even only when the level is subnormal; a * -2^k is -(a * 2^k), that rounding being symmetric);
// codes 0 and 8 are +0; every code is the quiet NaN when a is a NaN or +-Inf.
LH_BLOCK_FN float e3m0_value(std::uint32_t c, float a) {
  if ((bits_of(a) & kExponentMask) == kExponentMask) return float_of(kQuietNan);
  const std::uint32_t e = c & 7u;
  if (e == 0) return 0.0f;
  // 2^(e - 7) as an f32 built from its exponent field: exact, e - 7 in [-6, 0].
  const float level = float_of((127u + e - 7u) << 23);
  return (c & 8u) != 0 ? a * -level : a * level;
}

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant::block
