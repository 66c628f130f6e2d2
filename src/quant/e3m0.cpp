// E3M0 encoders and decoders (e3m0.hpp), compiled once per ISA (isa_namespace.hpp). The portable
// loops are the definition. The AVX-512 build's loops compute the same thing another way where
// that is faster, each step argued exact where it is written and held to the scalar build bit for
// bit by tests/unit/quant/e3m0_test.cpp and isa_test.cpp: the
// thresholds of 16 blocks in one vector (a conversion rounding up in place of ceil_key), codes
// from two thresholds and a shift in place of seven compares, and decoding by a 16-entry
// permutation of the same products.
//
// Exactness of the rounding. |x| is compared with the six midpoints 0.75 * A * 2^k (k = -5..0) and
// with A * 2^-7, never divided by A. A is an f32, m * 2^q with m < 2^24, so each threshold is
// 3m * 2^(q + k - 2) or m * 2^(q - 7): at most 26 significant bits and an exponent far inside the
// double range, so the double product is exact. Rounded up to the next f32 (ceil_key), a threshold
// T keeps its meaning for every f32 a: a >= T exactly when a >= ceil(T). Nonnegative floats order
// as their bit patterns do, subnormals and +0 included, so each comparison is one unsigned integer
// compare of |x|'s bits, the same on every ISA and unaffected by DAZ.
#include "quant/e3m0.hpp"

#include "quant/block_codec.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

namespace longhaul::quant::e3m0 {
inline namespace LH_QUANT_ISA_NS {

static_assert(std::endian::native == std::endian::little, "the format is little-endian");

namespace {

// The per-block arithmetic is block_codec.hpp's, shared with the GPU kernels; the vector loops
// below compute the same things another way.
using block::kExponentMask;
using block::kMagnitudeMask;
using block::kNever;
using block::kQuietNan;
using Encoding = block::E3m0Encoding;
using block::magnitude_key;

#define LH_E3M0_INLINE [[gnu::always_inline]] inline

// The largest magnitude key of x[0..n): the key of A, or of +Inf / a NaN. An integer max, so the
// order the vector lanes visit the elements in does not matter; the compiler vectorizes it.
LH_E3M0_INLINE std::uint32_t max_magnitude_key(const float* __restrict x, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t k = magnitude_key(x[i]);
    m = k > m ? k : m;
  }
  return m;
}

Encoding block_encoding(std::uint32_t max_key) {
  return block::e3m0_encoding(max_key);
}

LH_E3M0_INLINE std::uint32_t code_of(float x, const Encoding& b) {
  return block::e3m0_code(x, b);
}

// The value of each of the 16 codes of a block with header a (block::e3m0_value).
struct Table {
  float value[16];
};
Table decode_table(float a) {
  Table t;
  for (int c = 0; c < 16; ++c) t.value[c] = block::e3m0_value(static_cast<std::uint32_t>(c), a);
  return t;
}

LH_E3M0_INLINE float read_scale(const std::byte* p) {
  float a;
  std::memcpy(&a, p, sizeof a);
  return a;
}

// ---- portable loops (the reference) ----------------------------------------------------------

LH_E3M0_INLINE std::size_t encode_block(const float* __restrict x, std::size_t n,
                                        std::byte* __restrict out) {
  const Encoding b = block_encoding(max_magnitude_key(x, n));
  std::memcpy(out, &b.header, sizeof b.header);
  auto* __restrict codes = reinterpret_cast<std::uint8_t*>(out + kHeaderBytes);
  const std::size_t pairs = n / 2;
  for (std::size_t j = 0; j < pairs; ++j) {
    codes[j] = static_cast<std::uint8_t>(code_of(x[2 * j], b) | (code_of(x[2 * j + 1], b) << 4));
  }
  if (n % 2 != 0) codes[pairs] = static_cast<std::uint8_t>(code_of(x[n - 1], b));
  return block_bytes(n);
}

template <Sink S>
LH_E3M0_INLINE std::size_t decode_block(const std::byte* __restrict in, std::size_t n,
                                        float* __restrict o) {
  const Table t = decode_table(read_scale(in));
  const auto* __restrict codes = reinterpret_cast<const std::uint8_t*>(in + kHeaderBytes);
  const std::size_t pairs = n / 2;
  for (std::size_t j = 0; j < pairs; ++j) {
    const std::uint32_t c = codes[j];
    put<S>(o[2 * j], t.value[c & 15u]);
    put<S>(o[2 * j + 1], t.value[c >> 4]);
  }
  if (n % 2 != 0) put<S>(o[n - 1], t.value[codes[pairs] & 15u]);
  return block_bytes(n);
}

// v = x + r into r, encode v, r = v - decode: one block at a time, so it stays in L1.
LH_E3M0_INLINE std::size_t feedback_block(const float* __restrict x, float* __restrict r,
                                          std::size_t n, std::byte* __restrict out) {
  for (std::size_t i = 0; i < n; ++i) r[i] = x[i] + r[i];
  const std::size_t bytes = encode_block(r, n, out);
  decode_block<Sink::kResidual>(out, n, r);
  return bytes;
}

// ---- AVX-512 loops ------------------------------------------------------------------------------

#if defined(LONGHAUL_QUANT_AVX512)

constexpr std::uint32_t kKeyFltMin = 0x00800000u;  // the smallest normal float
constexpr int kThresholds = block::kE3m0Thresholds;

// Threshold j (code e >= j + 1) over A, as block::e3m0_encoding uses them: A / 128, then
// 0.75 * 2^(e - 7) for e = 2..7 (the vector loops start from the first two).
constexpr double kThresholdFactor[kThresholds] = {
    0x1p-7, 0.75 * 0x1p-5, 0.75 * 0x1p-4, 0.75 * 0x1p-3, 0.75 * 0x1p-2, 0.75 * 0x1p-1, 0.75};

// The value of each of the 16 codes of a block with header a: a * kFactor[c] (table16), a single
// f32 multiplication by an exact power of two (exact unless the level is subnormal, then rounded to
// nearest even in the pinned FP environment; a * -2^k is -(a * 2^k) because that rounding is
// symmetric); codes 0 and 8 are +0 (8 is never written); every code is the canonical quiet NaN
// when a is a NaN or +-Inf.
constexpr float kFactor[16] = {0.0f,     0x1p-6f,  0x1p-5f,  0x1p-4f,  0x1p-3f,  0x1p-2f,
                               0x1p-1f,  1.0f,     0.0f,     -0x1p-6f, -0x1p-5f, -0x1p-4f,
                               -0x1p-3f, -0x1p-2f, -0x1p-1f, -1.0f};
constexpr __mmask16 kNonzeroCodes = 0xFEFE;  // every code but 0 and 8

// decode_table as a vector: the same f32 product a * kFactor[c] lane by lane, 0 and 8 zeroed.
LH_E3M0_INLINE __m512 table16(float a) {
  if ((__builtin_bit_cast(std::uint32_t, a) & kExponentMask) == kExponentMask)
    return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kQuietNan)));
  return _mm512_maskz_mul_ps(kNonzeroCodes, _mm512_set1_ps(a), _mm512_loadu_ps(kFactor));
}

// code_of for 16 lanes with all seven thresholds; lanes outside m are 0. For blocks whose
// thresholds 2..7 are not all normal floats (A below about 2^-120).
LH_E3M0_INLINE __m512i codes16_counted(__m512 v, const __m512i (&t)[kThresholds], __mmask16 m) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i k = _mm512_and_si512(u, _mm512_set1_epi32(static_cast<int>(kMagnitudeMask)));
  const __m512i one = _mm512_set1_epi32(1);
  __m512i e = _mm512_setzero_si512();
  for (int j = 0; j < kThresholds; ++j)
    e = _mm512_mask_add_epi32(e, _mm512_cmpge_epu32_mask(k, t[j]), e, one);
  const __mmask16 nonzero = _mm512_mask_test_epi32_mask(m, e, e);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 28), _mm512_set1_epi32(8));
  return _mm512_maskz_or_epi32(nonzero, e, sign);
}

// code_of for 16 lanes from two thresholds, for blocks whose thresholds 2..7 are normal floats
// above FLT_MIN (t2 > kKeyFltMin) and for all-zero and NaN blocks (t1 = kNever). Doubling maps
// the normal floats above FLT_MIN onto those of the next binade, so the rounded-up thresholds
// double too: t_j = t_2 + (j - 2) * 2^23 as keys, and the count of thresholds 2..7 that k
// reaches is (k - t_2) >> 23 (arithmetic) + 1 for k >= t_2, at most 6 because A < 2 * t_7. With
// c = t_2 - 2^24, e = max((k - c) >> 23, 1) wherever k >= t_1. Checked bit for bit against the
// portable count by the tests.
LH_E3M0_INLINE __m512i codes16_spaced(__m512 v, __m512i t1, __m512i c, __mmask16 m) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i k = _mm512_and_si512(u, _mm512_set1_epi32(static_cast<int>(kMagnitudeMask)));
  const __m512i e =
      _mm512_max_epi32(_mm512_srai_epi32(_mm512_sub_epi32(k, c), 23), _mm512_set1_epi32(1));
  const __mmask16 nonzero = _mm512_mask_cmpge_epu32_mask(m, k, t1);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 28), _mm512_set1_epi32(8));
  return _mm512_maskz_or_epi32(nonzero, e, sign);
}

// Stores the 16 codes of q (element i in lane i) as 8 bytes, element 2j in the low nibble of byte
// j; for the last, partial vector only the bytes that hold one of its `lanes` codes.
LH_E3M0_INLINE void pack16(__m512i q, std::uint8_t* __restrict out, std::size_t lanes) {
  // Each 64-bit lane holds an even code in its low half and the next in its high half:
  // lane | lane >> 28 puts the pair in the low byte, which the truncating narrowing keeps.
  const __m512i pairs = _mm512_or_si512(q, _mm512_srli_epi64(q, 28));
  if (lanes == 16) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi8(pairs));
  } else {
    const auto bytes = static_cast<__mmask8>((1u << ((lanes + 1) / 2)) - 1u);
    _mm512_mask_cvtepi64_storeu_epi8(out, bytes, pairs);
  }
}

// The values of the 16 codes of 8 bytes (element 2j from the low nibble of byte j): a 64-bit lane
// per byte, the high nibble moved to the upper 32 bits; vpermps reads the low 4 bits of each
// 32-bit index, which are then the low and the high nibble.
LH_E3M0_INLINE __m512 values16(__m128i bytes, __m512 table) {
  const __m512i q = _mm512_cvtepu8_epi64(bytes);
  return _mm512_permutexvar_ps(_mm512_or_si512(q, _mm512_slli_epi64(q, 28)), table);
}

// The headers and the first two thresholds of up to 16 blocks from their largest magnitude keys,
// in vectors: the double products of block_encoding, converted rounding toward +Inf, which is
// exactly ceil_key's smallest float >= t.
struct GroupThresholds {
  alignas(64) float header[16];
  alignas(64) std::uint32_t t1[16];
  alignas(64) std::uint32_t t2[16];
};
LH_E3M0_INLINE GroupThresholds group_thresholds(const std::uint32_t* max_key, std::size_t blocks) {
  const __m512i keys = _mm512_maskz_loadu_epi32(avx512::tail_mask(blocks), max_key);
  const __mmask16 non_finite =
      _mm512_cmpge_epu32_mask(keys, _mm512_set1_epi32(static_cast<int>(kExponentMask)));
  const __mmask16 special = non_finite | _mm512_testn_epi32_mask(keys, keys);
  const __m512 a = _mm512_castsi512_ps(keys);
  const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
  const __m512d hi =
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  auto ceil16 = [&](double factor) __attribute__((always_inline)) {
    constexpr int kUp = _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC;
    const __m512d f = _mm512_set1_pd(factor);
    const __m256 l = _mm512_cvt_roundpd_ps(_mm512_mul_pd(lo, f), kUp);
    const __m256 h = _mm512_cvt_roundpd_ps(_mm512_mul_pd(hi, f), kUp);
    const __m512i both = _mm512_castpd_si512(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(l)), _mm256_castps_pd(h), 1));
    return _mm512_mask_mov_epi32(both, special, _mm512_set1_epi32(static_cast<int>(kNever)));
  };
  GroupThresholds g;
  _mm512_store_si512(g.t1, ceil16(kThresholdFactor[0]));
  _mm512_store_si512(g.t2, ceil16(kThresholdFactor[1]));
  _mm512_store_ps(
      g.header,
      _mm512_mask_mov_ps(a, non_finite,
                         _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kQuietNan)))));
  return g;
}

// The codes of one block of n elements, codes_of(values, lanes) giving them 16 at a time.
// kFeedback: x holds v = input + residual and gets the residual that decode_block<kResidual>
// would leave, from the codes still in registers.
template <bool kFeedback, class CodesOf>
LH_E3M0_INLINE void block_codes(std::conditional_t<kFeedback, float*, const float*> x,
                                std::size_t n, float header, std::uint8_t* __restrict codes,
                                CodesOf codes_of) {
  __m512 table = _mm512_setzero_ps();
  if constexpr (kFeedback) table = table16(header);
  auto step = [&](std::size_t i, __m512 v, __mmask16 m) __attribute__((always_inline)) {
    const __m512i q = codes_of(v, m);
    pack16(q, codes + i / 2, min_of(16, n - i));
    if constexpr (kFeedback) put16<Sink::kResidual>(x + i, _mm512_permutexvar_ps(q, table), m);
  };
  avx512::for_each_f32x16(x, n, step);
}

// encode_block for `blocks` (at most 16) consecutive blocks of n elements: the scans first, then
// the thresholds of all of them in vectors, then the codes.
template <bool kFeedback>
std::byte* encode_blocks_avx512(std::conditional_t<kFeedback, float*, const float*> x,
                                std::size_t blocks, std::size_t n, std::byte* __restrict out) {
  alignas(64) std::uint32_t max_key[16];
  for (std::size_t b = 0; b < blocks; ++b) max_key[b] = max_magnitude_key(x + b * n, n);
  const GroupThresholds g = group_thresholds(max_key, blocks);
  for (std::size_t b = 0; b < blocks; ++b, out += block_bytes(n)) {
    std::memcpy(out, &g.header[b], sizeof(float));
    auto* __restrict codes = reinterpret_cast<std::uint8_t*>(out + kHeaderBytes);
    if (g.t2[b] > kKeyFltMin) [[likely]] {
      const __m512i t1 = _mm512_set1_epi32(static_cast<int>(g.t1[b]));
      const __m512i c = _mm512_set1_epi32(static_cast<int>(g.t2[b] - (1u << 24)));
      block_codes<kFeedback>(
          x + b * n, n, g.header[b],
          codes, [&](__m512 v, __mmask16 m) __attribute__((always_inline)) {
            return codes16_spaced(v, t1, c, m);
          });
    } else {
      const Encoding e = block_encoding(max_key[b]);
      __m512i t[kThresholds];
      for (int j = 0; j < kThresholds; ++j)
        t[j] = _mm512_set1_epi32(static_cast<int>(e.threshold[j]));
      block_codes<kFeedback>(x + b * n, n, g.header[b], codes,
                             [&](__m512 v, __mmask16 m) { return codes16_counted(v, t, m); });
    }
  }
  return out;
}

template <Sink S>
LH_E3M0_INLINE std::size_t decode_block_avx512(const std::byte* __restrict in, std::size_t n,
                                               float* __restrict o) {
  const __m512 table = table16(read_scale(in));
  const std::byte* codes = in + kHeaderBytes;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i / 2));
    put16<S>(o + i, values16(bytes, table), avx512::kAllLanes);
  }
  if (i < n) {
    const auto bytes_mask = static_cast<__mmask16>((1u << ((n - i + 1) / 2)) - 1u);
    const __m128i bytes = _mm_maskz_loadu_epi8(bytes_mask, codes + i / 2);
    put16<S>(o + i, values16(bytes, table), avx512::tail_mask(n - i));
  }
  return block_bytes(n);
}

#endif  // LONGHAUL_QUANT_AVX512

// ---- block loops: kFixed != 0 is the block size known at compile time ---------------------------

// The AVX-512 build takes its own loops and returns before the portable ones, which stay compiled
// there too (otherwise clang reports the portable block functions unneeded in that build).
template <std::size_t kFixed>
void encode_blocks(const float* __restrict x, std::size_t count, std::byte* __restrict out,
                   std::size_t block) {
  const std::size_t bs = kFixed != 0 ? kFixed : block;
  const std::size_t full = count / bs;
  const std::size_t rest = count % bs;
#if defined(LONGHAUL_QUANT_AVX512)
  for (std::size_t b = 0; b < full; b += 16)
    out = encode_blocks_avx512<false>(x + b * bs, min_of(16, full - b), bs, out);
  if (rest != 0) encode_blocks_avx512<false>(x + full * bs, 1, rest, out);
  return;
#endif
  for (std::size_t b = 0; b < full; ++b) out += encode_block(x + b * bs, bs, out);
  if (rest != 0) encode_block(x + full * bs, rest, out);
}

template <Sink S, std::size_t kFixed>
void decode_blocks(const std::byte* __restrict in, std::size_t count, float* __restrict o,
                   std::size_t block) {
  const std::size_t bs = kFixed != 0 ? kFixed : block;
  const std::size_t full = count / bs;
  const std::size_t rest = count % bs;
#if defined(LONGHAUL_QUANT_AVX512)
  for (std::size_t b = 0; b < full; ++b) in += decode_block_avx512<S>(in, bs, o + b * bs);
  if (rest != 0) decode_block_avx512<S>(in, rest, o + full * bs);
  return;
#endif
  for (std::size_t b = 0; b < full; ++b) in += decode_block<S>(in, bs, o + b * bs);
  if (rest != 0) decode_block<S>(in, rest, o + full * bs);
}

template <std::size_t kFixed>
void feedback_blocks(const float* __restrict x, float* __restrict r, std::size_t count,
                     std::byte* __restrict out, std::size_t block) {
  const std::size_t bs = kFixed != 0 ? kFixed : block;
  const std::size_t full = count / bs;
  const std::size_t rest = count % bs;
#if defined(LONGHAUL_QUANT_AVX512)
  // Sixteen blocks at a time (4 KiB of v at the default block, still in L1).
  for (std::size_t b = 0; b < full; b += 16) {
    const std::size_t m = min_of(16, full - b);
    for (std::size_t i = b * bs; i < (b + m) * bs; ++i) r[i] = x[i] + r[i];
    out = encode_blocks_avx512<true>(r + b * bs, m, bs, out);
  }
  if (rest != 0) {
    for (std::size_t i = full * bs; i < count; ++i) r[i] = x[i] + r[i];
    encode_blocks_avx512<true>(r + full * bs, 1, rest, out);
  }
  return;
#endif
  for (std::size_t b = 0; b < full; ++b) out += feedback_block(x + b * bs, r + b * bs, bs, out);
  if (rest != 0) feedback_block(x + full * bs, r + full * bs, rest, out);
}

// Calls f.template operator()<kFixed>() with the block size as a compile-time constant where it
// is one of the common ones, so the loops over a block are fully unrolled.
template <class F>
void with_block(std::size_t block, F f) {
  if (block == 128) {
    f.template operator()<128>();
  } else if (block == 64) {
    f.template operator()<64>();
  } else {
    f.template operator()<0>();
  }
}

template <Sink S>
void decode_to(const std::byte* in, std::size_t count, float* o, std::size_t block) {
  with_block(block, [&]<std::size_t kFixed>() { decode_blocks<S, kFixed>(in, count, o, block); });
}

}  // namespace

void encode(const float* x, std::size_t count, std::byte* out, std::size_t block) {
  with_block(block, [&]<std::size_t kFixed>() { encode_blocks<kFixed>(x, count, out, block); });
}

void decode(const std::byte* in, std::size_t count, float* o, std::size_t block, Sink sink) {
  switch (sink) {
    case Sink::kStore:
      return decode_to<Sink::kStore>(in, count, o, block);
    case Sink::kAdd:
      return decode_to<Sink::kAdd>(in, count, o, block);
    case Sink::kResidual:
      return decode_to<Sink::kResidual>(in, count, o, block);
  }
}

void encode_with_error_feedback(const float* x, float* residual, std::size_t count, std::byte* out,
                                std::size_t block) {
  with_block(block, [&]<std::size_t kFixed>() {
    feedback_blocks<kFixed>(x, residual, count, out, block);
  });
}

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant::e3m0
