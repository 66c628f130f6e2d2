// AVX-512 forms of the codecs' per-element loops (codec.cpp: the u8/u4 and fp16 encoders, the
// fp16 decoder, error feedback's residual; reduce.cpp's f16 accumulator uses the fp16 pair, and
// its half-precision sum both 16-bit pairs), for
// builds whose target has AVX-512 F/BW/VL and F16C (the avx512 build of the kernels,
// cmake/isa.cmake).
//
// Why by hand: at a cache-resident 1 MiB segment the auto-vectorized loops ran at 0.41-0.46x
// memcpy (u4, u8, fp16 encode on an AVX-512 EPYC). The compiler cannot use the instructions that
// do these jobs in one step: a conversion that rounds to nearest even (it only has truncation, so
// the portable loop rounds with the 1.5 * 2^23 trick: two extra operations), a narrowing store
// that saturates (the u8 clamp for free), and the hardware f32 -> f16 conversion.
//
// Every function here computes exactly the bits of the portable loop it replaces, for every input
// (tests/unit/quant/codec_test.cpp holds them to codec.cpp's portable path, NaNs, infinities,
// subnormals and ties included):
// - for 0 <= v <= 2^22, round-to-nearest-even conversion equals the portable
//   int((v + 1.5 * 2^23) - 1.5 * 2^23); unsigned saturation to 255 equals min(q, 255);
// - VCVTPS2PH with round-to-nearest-even is the IEEE conversion, as is f32_to_f16, except that
//   it keeps NaN payloads where f32_to_f16 stores the canonical quiet NaN; that case is patched.
// The rounding mode is explicit in each instruction, so the caller's MXCSR rounding bits do not
// matter; FTZ/DAZ are off inside the public entry points (fp_env.hpp).
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#define LONGHAUL_QUANT_AVX512 1

// GCC 12 flags its own AVX-512 intrinsics that start from an undefined vector
// (-Wuninitialized on _mm512_undefined_*), wherever they are inlined; the warning is located in
// the intrinsics header, so it is silenced there only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstdint>

#include "quant/isa_namespace.hpp"

namespace longhaul::quant::avx512 {
inline namespace LH_QUANT_ISA_NS {

constexpr int kNearestNoExc = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

[[gnu::always_inline]] inline __mmask16 tail_mask(std::size_t remaining) {
  return static_cast<__mmask16>((1u << remaining) - 1u);
}

constexpr __mmask16 kAllLanes = 0xFFFF;

// Calls put(i, values, lanes) for x[i..i+16), i = 0, 16, ..., with the lanes past n masked off
// (and loaded as 0). Inlined, `lanes` is the constant kAllLanes on every call but the last.
template <class Put>
[[gnu::always_inline]] inline void for_each_f32x16(const float* x, std::size_t n, Put put) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) put(i, _mm512_loadu_ps(x + i), kAllLanes);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    put(i, _mm512_maskz_loadu_ps(m, x + i), m);
  }
}

// The order keys of codec.cpp (s ^ ((s >> 31) & 0x7FFFFFFF)), for 16 floats.
[[gnu::always_inline]] inline __m512i order_keys(__m512i s) {
  const __mmask16 negative = _mm512_cmplt_epi32_mask(s, _mm512_setzero_si512());
  return _mm512_mask_xor_epi32(s, negative, s, _mm512_set1_epi32(0x7FFFFFFF));
}

// The smallest and largest order key of x[0..n), n >= 1.
[[gnu::always_inline]] inline void key_range(const float* __restrict x, std::size_t n,
                                             std::int32_t& kmin, std::int32_t& kmax) {
  __m512i lo = _mm512_set1_epi32(INT32_MAX);
  __m512i hi = _mm512_set1_epi32(INT32_MIN);
  for_each_f32x16(
      x, n, [&](std::size_t, __m512 v, __mmask16 m) __attribute__((always_inline)) {
        const __m512i k = order_keys(_mm512_castps_si512(v));
        lo = _mm512_mask_min_epi32(lo, m, lo, k);
        hi = _mm512_mask_max_epi32(hi, m, hi, k);
      });
  // Both reductions at once: max(k) = ~min(~k), so the 8-lane halves of lo and ~hi share one
  // vector and three min steps.
  const __m256i lo8 =
      _mm256_min_epi32(_mm512_castsi512_si256(lo), _mm512_extracti64x4_epi64(lo, 1));
  const __m256i hi8 =
      _mm256_max_epi32(_mm512_castsi512_si256(hi), _mm512_extracti64x4_epi64(hi, 1));
  __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo8),
                                    _mm256_xor_si256(hi8, _mm256_set1_epi32(-1)), 1);
  both = _mm512_min_epi32(both, _mm512_shuffle_i32x4(both, both, _MM_SHUFFLE(2, 3, 0, 1)));
  both = _mm512_min_epi32(both, _mm512_shuffle_epi32(both, _MM_PERM_BADC));
  both = _mm512_min_epi32(both, _mm512_shuffle_epi32(both, _MM_PERM_CDAB));
  kmin = _mm_cvtsi128_si32(_mm512_castsi512_si128(both));
  kmax = ~_mm_cvtsi128_si32(_mm512_extracti32x4_epi32(both, 2));
}

// round_half_even((x - lo) * inv) for 16 floats, as integers (no FMA: a separate sub and mul).
[[gnu::always_inline]] inline __m512i codes16(__m512 x, __m512 lo, __m512 inv) {
  return _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_sub_ps(x, lo), inv), kNearestNoExc);
}

// Error feedback, 16 lanes: the residual v - (lo + q * scale) that codec.cpp's decode with
// Sink::kResidual leaves (the same multiply, then add, then subtract), 0 where it is not finite.
[[gnu::always_inline]] inline __m512 residual16(__m512 v, __m512i q, __m512 lo, __m512 scale) {
  const __m512 r = _mm512_sub_ps(v, _mm512_add_ps(lo, _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale)));
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_sub_ps(r, r), _mm512_setzero_ps(), _CMP_EQ_OQ);
  return _mm512_maskz_mov_ps(finite, r);
}

// The codes of a finite block: min(round((x - lo) * inv), kLevels). kLevels 255 (u8): one byte
// each. kLevels 15 (u4): element 2j in the low nibble of byte j and 2j+1 in its high nibble (0
// past an odd last element). kFeedback: x is the error-feedback sum v, and is overwritten with
// its residual (see residual16).
template <int kLevels, bool kFeedback>
[[gnu::always_inline]] inline void quantize(float* x, std::size_t n, float lo, float inv,
                                            float scale, std::uint8_t* __restrict codes) {
  static_assert(kLevels == 255 || kLevels == 15);
  const __m512 vlo = _mm512_set1_ps(lo);
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512i levels = _mm512_set1_epi32(kLevels);
  // Whole vectors store the codes from a register: a masked narrowing store to memory is much
  // slower on some cores (AMD Zen 4).
  auto step = [&](std::size_t i, __m512 v, __mmask16 m) __attribute__((always_inline)) {
    const __m512i q = _mm512_maskz_min_epi32(m, codes16(v, vlo, vinv), levels);  // 0 past n
    if constexpr (kLevels == 255) {
      if (m == kAllLanes)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_cvtepi32_epi8(q));
      else
        _mm512_mask_cvtepi32_storeu_epi8(codes + i, m, q);
    } else {
      // Each 64-bit lane holds an even code in its low half and the next code in its high half:
      // lane | lane >> 28 puts the pair in the low byte, which the truncating narrowing keeps.
      const __m512i pairs = _mm512_or_si512(q, _mm512_srli_epi64(q, 28));
      if (m == kAllLanes) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i / 2), _mm512_cvtepi64_epi8(pairs));
      } else {
        const auto bytes = static_cast<__mmask8>((1u << ((n - i + 1) / 2)) - 1u);
        _mm512_mask_cvtepi64_storeu_epi8(codes + i / 2, bytes, pairs);
      }
    }
    if constexpr (kFeedback) _mm512_mask_storeu_ps(x + i, m, residual16(v, q, vlo, vscale));
  };
  for_each_f32x16(x, n, step);
}

// f32 -> binary16, round to nearest even, every NaN as the canonical quiet NaN 0x7E00 (sign
// kept): 16 floats.
[[gnu::always_inline]] inline __m256i f16x16(__m512 x) {
  const __m256i h = _mm512_cvtps_ph(x, kNearestNoExc);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  if (nan == 0) [[likely]]
    return h;
  // The conversion keeps a NaN's sign bit.
  const __m256i canonical =
      _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<short>(0x8000))),
                      _mm256_set1_epi16(0x7E00));
  return _mm256_mask_mov_epi16(h, nan, canonical);
}

inline void encode_f16(const float* __restrict x, std::size_t n, std::byte* __restrict out) {
  for_each_f32x16(
      x, n, [out](std::size_t i, __m512 v, __mmask16 m) __attribute__((always_inline)) {
        _mm256_mask_storeu_epi16(out + 2 * i, m, f16x16(v));
      });
}

// binary16 -> f32 for 16 values: exact, as f16_to_f32, which also keeps a signalling NaN's
// payload as it is where VCVTPH2PS would set its quiet bit; NaN lanes are rebuilt from the bits.
[[gnu::always_inline]] inline __m512 f32x16(__m256i h) {
  const __m512 f = _mm512_cvtph_ps(h);
  const __mmask16 nan = _mm256_cmpgt_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)),
                                                _mm256_set1_epi16(0x7C00));
  if (nan == 0) [[likely]]
    return f;
  const __m512i t = _mm512_cvtepu16_epi32(h);
  const __m512i bits = _mm512_or_si512(
      _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(0x8000)), 16),
                      _mm512_set1_epi32(0x7F800000)),
      _mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(0x3FF)), 13));
  return _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(bits));
}

// Calls put(i, values, lanes) for the f32 values of the binary16 elements i..i+15 of `in` (n
// elements), the lanes past n masked off.
template <class Put>
[[gnu::always_inline]] inline void for_each_f16x16(const std::byte* in, std::size_t n, Put put) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    put(i, f32x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * i))),
        static_cast<__mmask16>(0xFFFF));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    put(i, f32x16(_mm256_maskz_loadu_epi16(m, in + 2 * i)), m);
  }
}

// bfloat16 -> f32 for 16 values: exact, as bf16_to_f32 (the bits moved up).
[[gnu::always_inline]] inline __m512 bf16_to_f32x16(__m256i b) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}

// f32 -> bfloat16 for 16 values, as f32_to_bf16: round to nearest even on the dropped bits (a
// carry into the exponent included), NaNs keep their sign and upper payload with the quiet bit set.
[[gnu::always_inline]] inline __m256i f32_to_bf16x16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  if (nan != 0) [[unlikely]]
    r = _mm512_mask_mov_epi32(r, nan,
                              _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040)));
  return _mm512_cvtepi32_epi16(r);
}

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant::avx512

#endif
