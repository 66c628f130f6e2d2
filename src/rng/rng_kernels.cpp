// The Philox words and the signed add of kernels.hpp, compiled once per ISA. A buffer is walked
// in batches of 16 Philox blocks (2,048 elements): the batch's words are generated into a small
// stack array (philox_simd.hpp's vector forms in the AVX2 and AVX-512 builds, philox.hpp's scalar
// one otherwise), then each 32-bit word signs the 32 elements it covers (perturbation.hpp).
//
// Why every build gives the same floats: element i gets v = c with its sign bit XORed with bit
// (i mod 32) of its word (exact: a sign flip), and then out = in + v, one IEEE addition, or
// out = v. The portable loop (sign_word_scalar), the baseline build's SSE2 lanes (AND, compare,
// XOR, add), the AVX2 lanes (variable shift, AND, XOR, add) and the AVX-512 lanes (mask blend of
// c and its sign-flipped copy, add) compute that same v and that same addition.
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "rng/isa_namespace.hpp"
#include "rng/kernels.hpp"
#include "rng/philox.hpp"
#include "rng/philox_simd.hpp"
#include "rng/stream.hpp"

namespace longhaul::rng {
inline namespace LH_RNG_ISA_NS {
namespace {

#define LH_RNG_INLINE [[gnu::always_inline]] inline

constexpr std::size_t kBatch = 16;             // Philox blocks per batch
constexpr std::uint64_t kBlockElements = 128;  // signs per block: 4 words of 32
constexpr std::uint32_t kSignBit = 0x80000000u;

using BatchWords = std::uint32_t[4][kBatch];  // [word][block of the batch]

LH_RNG_INLINE std::size_t smaller(std::size_t a, std::size_t b) {
  return b < a ? b : a;
}

// words[w][b] = word w of block first + b, b < kBatch.
LH_RNG_INLINE void generate_batch(const PhiloxStream& s, std::uint32_t first, BatchWords& words) {
#if defined(LH_RNG_AVX512)
  simd::philox16(s, first, words);
#elif defined(LH_RNG_AVX2)
  simd::philox8(s, first, words, 0);
  simd::philox8(s, first + 8, words, 8);
#else
  const PhiloxKey key = {{s.key[0], s.key[1]}};
  for (std::size_t b = 0; b < kBatch; ++b) {
    const PhiloxBlock counter = {{first + static_cast<std::uint32_t>(b), s.counter_high[0],
                                  s.counter_high[1], s.counter_high[2]}};
    const PhiloxBlock r = philox4x32_10(counter, key);
    for (int w = 0; w < 4; ++w) words[w][b] = r.w[w];
  }
#endif
}

// The reference form: element j of the word gets c with its sign flipped when bit j is set.
template <bool kHasInput>
LH_RNG_INLINE void sign_word_scalar(std::uint32_t bits, const float* in, float* out, std::size_t k,
                                    std::uint32_t c_bits) {
  for (std::size_t j = 0; j < k; ++j) {
    const float v = __builtin_bit_cast(float, c_bits ^ (((bits >> j) & 1u) << 31));
    out[j] = kHasInput ? in[j] + v : v;
  }
}

// Elements 0 .. k-1 (k <= 32) of one word, bit j signing element j.
template <bool kHasInput>
LH_RNG_INLINE void sign_word(std::uint32_t bits, const float* in, float* out, std::size_t k,
                             std::uint32_t c_bits) {
#if defined(LH_RNG_AVX512)
  const __m512 pos = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(c_bits)));
  const __m512 neg = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(c_bits ^ kSignBit)));
  const auto lo = static_cast<__mmask16>(bits), hi = static_cast<__mmask16>(bits >> 16);
  if (k == 32) {  // unmasked loads and stores: the masked ones halved the in-place rate at 16 MiB
    __m512 v0 = _mm512_mask_blend_ps(lo, pos, neg), v1 = _mm512_mask_blend_ps(hi, pos, neg);
    if constexpr (kHasInput) {
      v0 = _mm512_add_ps(_mm512_loadu_ps(in), v0);
      v1 = _mm512_add_ps(_mm512_loadu_ps(in + 16), v1);
    }
    _mm512_storeu_ps(out, v0);
    _mm512_storeu_ps(out + 16, v1);
    return;
  }
  for (std::size_t h = 0; h < 2 && 16 * h < k; ++h) {
    const std::size_t lanes_here = smaller(k - 16 * h, 16);
    const auto lanes = static_cast<__mmask16>((1u << lanes_here) - 1u);
    __m512 v = _mm512_mask_blend_ps(h == 0 ? lo : hi, pos, neg);
    if constexpr (kHasInput) v = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, in + 16 * h), v);
    _mm512_mask_storeu_ps(out + 16 * h, lanes, v);
  }
#elif defined(LH_RNG_AVX2)
  // Lane j of a group of 8 shifts its bit to the sign position: bits << (31 - j).
  const __m256i to_sign = _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24);
  const __m256i c = _mm256_set1_epi32(static_cast<int>(c_bits));
  const __m256i sign_mask = _mm256_set1_epi32(static_cast<int>(kSignBit));
  std::size_t j = 0;
  for (; j + 8 <= k; j += 8) {
    const __m256i group = _mm256_set1_epi32(static_cast<int>(bits >> j));
    const __m256i sign = _mm256_and_si256(_mm256_sllv_epi32(group, to_sign), sign_mask);
    __m256 v = _mm256_castsi256_ps(_mm256_xor_si256(c, sign));
    if constexpr (kHasInput) v = _mm256_add_ps(_mm256_loadu_ps(in + j), v);
    _mm256_storeu_ps(out + j, v);
  }
  sign_word_scalar<kHasInput>(bits >> (j & 31), kHasInput ? in + j : in, out + j, k - j, c_bits);
#elif defined(__SSE2__)
  // The baseline x86-64 build: 4 lanes, lane j's bit tested by an AND and a compare.
  const __m128i lane_bit = _mm_setr_epi32(1, 2, 4, 8);
  const __m128i c = _mm_set1_epi32(static_cast<int>(c_bits));
  const __m128i sign_mask = _mm_set1_epi32(static_cast<int>(kSignBit));
  std::size_t j = 0;
  for (; j + 4 <= k; j += 4) {
    const __m128i group = _mm_set1_epi32(static_cast<int>(bits >> j));
    const __m128i set = _mm_cmpeq_epi32(_mm_and_si128(group, lane_bit), lane_bit);
    __m128 v = _mm_castsi128_ps(_mm_xor_si128(c, _mm_and_si128(set, sign_mask)));
    if constexpr (kHasInput) v = _mm_add_ps(_mm_loadu_ps(in + j), v);
    _mm_storeu_ps(out + j, v);
  }
  sign_word_scalar<kHasInput>(bits >> (j & 31), kHasInput ? in + j : in, out + j, k - j, c_bits);
#else
  sign_word_scalar<kHasInput>(bits, in, out, k, c_bits);
#endif
}

// The elements first .. first + n - 1 of the stream, word by word; the first word may start
// inside (at the element's bit), the last may end early.
template <bool kHasInput>
void add_signed_impl(const PhiloxStream& s, std::uint64_t first, const float* in, float* out,
                     std::size_t n, float c) {
  const std::uint32_t c_bits = __builtin_bit_cast(std::uint32_t, c);
  BatchWords words;
  std::uint64_t element = first;
  std::size_t done = 0;
  while (done < n) {
    const std::uint64_t block0 = element / kBlockElements;
    generate_batch(s, static_cast<std::uint32_t>(block0), words);
    for (std::size_t b = 0; b < kBatch && done < n; ++b) {
      for (std::size_t w = 0; w < 4 && done < n; ++w) {
        const std::uint64_t word_start = (block0 + b) * kBlockElements + 32 * w;
        if (word_start + 32 <= element) continue;  // before the first element
        const auto offset = static_cast<std::uint32_t>(element - word_start);
        const std::size_t k = smaller(32 - offset, n - done);
        sign_word<kHasInput>(words[w][b] >> offset, kHasInput ? in + done : in, out + done, k,
                             c_bits);
        element += k;
        done += k;
      }
    }
  }
}

void add_signed(const PhiloxStream& s, std::uint64_t first, const float* in, float* out,
                std::size_t n, float c) {
  if (in != nullptr)
    add_signed_impl<true>(s, first, in, out, n, c);
  else
    add_signed_impl<false>(s, first, in, out, n, c);
}

void philox_words(const PhiloxStream& s, std::uint32_t first_block, std::size_t count,
                  std::uint32_t* out) {
  BatchWords words;
  for (std::size_t i = 0; i < count; i += kBatch) {
    generate_batch(s, first_block + static_cast<std::uint32_t>(i), words);
    for (std::size_t b = 0; b < smaller(kBatch, count - i); ++b)
      for (std::size_t w = 0; w < 4; ++w) out[4 * (i + b) + w] = words[w][b];
  }
}

}  // namespace

constinit const RngEntries kRngEntries = {
    .philox_words = philox_words,
    .add_signed = add_signed,
};

}  // namespace LH_RNG_ISA_NS
}  // namespace longhaul::rng
