// Philox4x32-10 for 8 (AVX2) or 16 (AVX-512) consecutive blocks at once, for the builds of
// rng_kernels.cpp whose target has those units (cmake/isa.cmake): each lane runs the scalar
// philox4x32_10 of philox.hpp on its own counter, in structure-of-arrays form (vector x_w holds
// counter word w of every lane).
//
// Why these give the scalar words: every step is integer arithmetic modulo 2^32 or 2^64, exact at
// any width. VPMULUDQ multiplies the low 32 bits of each 64-bit lane into a 64-bit product, so the
// even lanes' products come from x itself and the odd lanes' from x >> 32; the blends then put
// each product's low half (lo) and high half (hi) back in its lane. tests/unit/rng/philox_test.cpp
// holds both forms to the scalar one and to the published Known Answer Tests.
#pragma once

#include <cstdint>

#include "rng/isa_namespace.hpp"
#include "rng/philox.hpp"
#include "rng/stream.hpp"

#if defined(__AVX2__)
// GCC 12 flags its own AVX-512 intrinsics that start from an undefined vector (-Wuninitialized),
// wherever they are inlined; as in quant/codec_avx512.hpp, silenced in the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace longhaul::rng::simd {
inline namespace LH_RNG_ISA_NS {

#if defined(__AVX512F__)
#define LH_RNG_AVX512 1

[[gnu::always_inline]] inline void mulhilo16(__m512i a, __m512i m, __m512i& lo, __m512i& hi) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  constexpr __mmask16 kOddLanes = 0xAAAA;
  lo = _mm512_mask_blend_epi32(kOddLanes, even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(kOddLanes, _mm512_srli_epi64(even, 32), odd);
}

// words[w][lane] = word w of block first + lane (mod 2^32), lane < 16.
[[gnu::always_inline]] inline void philox16(const PhiloxStream& s, std::uint32_t first,
                                            std::uint32_t (&words)[4][16]) {
  const __m512i step = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i x0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first)), step);
  __m512i x1 = _mm512_set1_epi32(static_cast<int>(s.counter_high[0]));
  __m512i x2 = _mm512_set1_epi32(static_cast<int>(s.counter_high[1]));
  __m512i x3 = _mm512_set1_epi32(static_cast<int>(s.counter_high[2]));
  __m512i k0 = _mm512_set1_epi32(static_cast<int>(s.key[0]));
  __m512i k1 = _mm512_set1_epi32(static_cast<int>(s.key[1]));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kPhiloxM1));
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      k0 = _mm512_add_epi32(k0, _mm512_set1_epi32(static_cast<int>(kPhiloxW0)));
      k1 = _mm512_add_epi32(k1, _mm512_set1_epi32(static_cast<int>(kPhiloxW1)));
    }
    __m512i lo0, hi0, lo1, hi1;
    mulhilo16(x0, m0, lo0, hi0);
    mulhilo16(x2, m1, lo1, hi1);
    x0 = _mm512_xor_si512(_mm512_xor_si512(hi1, x1), k0);
    x1 = lo1;
    x2 = _mm512_xor_si512(_mm512_xor_si512(hi0, x3), k1);
    x3 = lo0;
  }
  _mm512_storeu_si512(words[0], x0);
  _mm512_storeu_si512(words[1], x1);
  _mm512_storeu_si512(words[2], x2);
  _mm512_storeu_si512(words[3], x3);
}

#elif defined(__AVX2__)
#define LH_RNG_AVX2 1

[[gnu::always_inline]] inline void mulhilo8(__m256i a, __m256i m, __m256i& lo, __m256i& hi) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  constexpr int kOddLanes = 0xAA;
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), kOddLanes);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, kOddLanes);
}

// words[w][offset + lane] = word w of block first + lane (mod 2^32), lane < 8.
[[gnu::always_inline]] inline void philox8(const PhiloxStream& s, std::uint32_t first,
                                           std::uint32_t (&words)[4][16], int offset) {
  const __m256i step = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i x0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), step);
  __m256i x1 = _mm256_set1_epi32(static_cast<int>(s.counter_high[0]));
  __m256i x2 = _mm256_set1_epi32(static_cast<int>(s.counter_high[1]));
  __m256i x3 = _mm256_set1_epi32(static_cast<int>(s.counter_high[2]));
  __m256i k0 = _mm256_set1_epi32(static_cast<int>(s.key[0]));
  __m256i k1 = _mm256_set1_epi32(static_cast<int>(s.key[1]));
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxM1));
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      k0 = _mm256_add_epi32(k0, _mm256_set1_epi32(static_cast<int>(kPhiloxW0)));
      k1 = _mm256_add_epi32(k1, _mm256_set1_epi32(static_cast<int>(kPhiloxW1)));
    }
    __m256i lo0, hi0, lo1, hi1;
    mulhilo8(x0, m0, lo0, hi0);
    mulhilo8(x2, m1, lo1, hi1);
    x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), k0);
    x1 = lo1;
    x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), k1);
    x3 = lo0;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[0] + offset), x0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[1] + offset), x1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[2] + offset), x2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[3] + offset), x3);
}

#endif

}  // namespace LH_RNG_ISA_NS
}  // namespace longhaul::rng::simd
