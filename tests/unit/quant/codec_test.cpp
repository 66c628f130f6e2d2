// Codecs: known-answer bytes, per-element error bounds per block, odd sizes, degenerate blocks,
// determinism, fused decode-accumulate, error feedback, and the blockwise-vs-chunk error ratio.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/codec.hpp"
#include "quant/error_report.hpp"
#include "quant/half.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace longhaul::quant {
namespace {

constexpr Codec kAllCodecs[] = {Codec::kNone, Codec::kFp16, Codec::kBf16,
                                Codec::kU8,   Codec::kU4,   Codec::kE3M0};

std::vector<std::byte> must_encode(std::span<const float> x, Codec c, std::size_t block) {
  Result<std::size_t> n = encoded_size(x.size(), c, block);
  EXPECT_TRUE(n.is_ok());
  std::vector<std::byte> out(n.is_ok() ? *n : 0);
  const Status s = encode(x, out, c, block);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

std::vector<float> must_decode(std::span<const std::byte> e, std::size_t count, Codec c,
                               std::size_t block) {
  std::vector<float> out(count);
  const Status s = decode(e, out, c, block);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

std::vector<float> normal_data(std::size_t n, std::uint64_t seed, float sigma = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

TEST(QuantCodec, EncodedSizes) {
  EXPECT_EQ(*encoded_size(10, Codec::kNone), 40u);
  EXPECT_EQ(*encoded_size(10, Codec::kFp16), 20u);
  EXPECT_EQ(*encoded_size(10, Codec::kBf16), 20u);
  EXPECT_EQ(*encoded_size(256, Codec::kU8, 128), 2 * (8 + 128u));
  EXPECT_EQ(*encoded_size(257, Codec::kU8, 128), 2 * (8 + 128u) + 8 + 1);
  EXPECT_EQ(*encoded_size(257, Codec::kU4, 128), 2 * (8 + 64u) + 8 + 1);
  EXPECT_EQ(*encoded_size(3, Codec::kU4, 3), 8 + 2u);
  EXPECT_EQ(*encoded_size(0, Codec::kU4), 0u);
  EXPECT_EQ(encoded_size(10, Codec::kU8, 0).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(encoded_size(10, Codec::kU8, kMaxBlock + 1).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(encoded_size(10, static_cast<Codec>(9)).status().code(), LH_ERR_INVALID_ARGUMENT);
}

// Pins the format: header floats and codes for a tiny block, including a rounding tie.
TEST(QuantCodec, KnownAnswerU8AndU4) {
  // lo = -1, scale = 255/255 = 1: codes are x + 1 rounded half to even (127.5 -> 128,
  // 126.5 -> 126, 3.25 -> 3).
  const std::vector<float> x = {-1.0f, 126.5f, 125.5f, 254.0f, 2.25f};
  const std::vector<std::byte> e = must_encode(x, Codec::kU8, 128);
  ASSERT_EQ(e.size(), 13u);
  float lo;
  float scale;
  std::memcpy(&lo, e.data(), 4);
  std::memcpy(&scale, e.data() + 4, 4);
  EXPECT_EQ(lo, -1.0f);
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(std::to_integer<int>(e[8]), 0);
  EXPECT_EQ(std::to_integer<int>(e[9]), 128);
  EXPECT_EQ(std::to_integer<int>(e[10]), 126);
  EXPECT_EQ(std::to_integer<int>(e[11]), 255);
  EXPECT_EQ(std::to_integer<int>(e[12]), 3);
  // A scale that is not a power of two. The encoder multiplies by inv = fl(255 / range) = 127.5
  // exactly, so 0 maps to the tie 127.5 -> 128; inv = 1 / fl(2/255) would be a little below 127.5
  // and give 127. Pins the choice of reciprocal.
  const std::vector<float> z = {-1.0f, 0.0f, 0.5f, 1.0f, 0.1f};
  const std::vector<std::byte> g = must_encode(z, Codec::kU8, 128);
  std::memcpy(&scale, g.data() + 4, 4);
  EXPECT_EQ(scale, 2.0f / 255.0f);
  const int want[] = {0, 128, 191, 255, 140};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(std::to_integer<int>(g[8 + i]), want[i]) << i;

  // u4: lo = 0, scale = 1 (range 15): codes 0, 2 (2.5 ties to even), 15, 8 (7.5 ties to even),
  // 1; element 2j in the low nibble.
  const std::vector<float> y = {0.0f, 2.5f, 15.0f, 7.5f, 1.0f};
  const std::vector<std::byte> f = must_encode(y, Codec::kU4, 128);
  ASSERT_EQ(f.size(), 8u + 3u);
  std::memcpy(&lo, f.data(), 4);
  std::memcpy(&scale, f.data() + 4, 4);
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(std::to_integer<int>(f[8]), 0x20);   // 0 | 2 << 4
  EXPECT_EQ(std::to_integer<int>(f[9]), 0x8F);   // 15 | 8 << 4
  EXPECT_EQ(std::to_integer<int>(f[10]), 0x01);  // the odd last element, high nibble 0
}

// |x - decode(encode(x))| <= scale / 2 per element, scale read from the element's block header,
// plus a few f32 roundings of the magnitudes involved.
void check_blockwise_bound(const std::vector<float>& x, Codec c, std::size_t block) {
  const std::vector<std::byte> e = must_encode(x, c, block);
  const std::vector<float> d = must_decode(e, x.size(), c, block);
  const float levels = c == Codec::kU8 ? 255.0f : 15.0f;
  const float eps = std::numeric_limits<float>::epsilon();
  for (std::size_t b = 0; b * block < x.size(); ++b) {
    Result<BlockHeader> h = read_block_header(e, x.size(), c, block, b);
    ASSERT_TRUE(h.is_ok());
    const float lo = h->lo;
    const float scale = h->scale;
    const float tol = 4 * eps * (std::fabs(lo) + levels * scale);
    for (std::size_t i = b * block; i < std::min(x.size(), (b + 1) * block); ++i) {
      ASSERT_LE(std::fabs(x[i] - d[i]), scale / 2 + tol)
          << codec_name(c) << " block " << block << " n " << x.size() << " i " << i;
      ASSERT_GE(x[i], lo);  // lo is the block's minimum
    }
  }
}

TEST(QuantCodec, BlockwiseErrorBoundAtOddSizes) {
  for (const Codec c : {Codec::kU8, Codec::kU4}) {
    for (const std::size_t block :
         {std::size_t{1}, std::size_t{3}, std::size_t{64}, kDefaultBlock}) {
      for (const std::size_t n : {std::size_t{1}, block - 1, block + 1, 5 * block + 3}) {
        if (n == 0) continue;
        check_blockwise_bound(normal_data(n, n * 31 + block, 3.0f), c, block);
      }
    }
    // 1M + 3 elements with the default block, and blocks that mix scales by 1e6.
    std::vector<float> big = normal_data((1u << 20) + 3, 99);
    for (std::size_t i = 0; i < big.size(); i += 1000) big[i] *= 1e6f;
    check_blockwise_bound(big, c, kDefaultBlock);
  }
}

TEST(QuantCodec, HalfCodecsRoundTripLikeTheConversions) {
  const std::vector<float> x = normal_data(1003, 4, 1000.0f);
  for (const Codec c : {Codec::kFp16, Codec::kBf16}) {
    const std::vector<float> d = must_decode(must_encode(x, c, 0), x.size(), c, 0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float want =
          c == Codec::kFp16 ? f16_to_f32(f32_to_f16(x[i])) : bf16_to_f32(f32_to_bf16(x[i]));
      ASSERT_EQ(d[i], want);
      const float rel = c == Codec::kFp16 ? std::ldexp(1.0f, -11) : std::ldexp(1.0f, -8);
      ASSERT_LE(std::fabs(d[i] - x[i]), rel * std::fabs(x[i]) + 1e-7f);
    }
  }
  const std::vector<float> d =
      must_decode(must_encode(x, Codec::kNone, 0), x.size(), Codec::kNone, 0);
  EXPECT_EQ(std::memcmp(d.data(), x.data(), x.size() * 4), 0);
}

TEST(QuantCodec, DegenerateBlocks) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Block 0: constant; block 1: has a NaN; block 2: has an Inf; block 3: ordinary;
  // block 4: huge range (max - min overflows f32); block 5: a range too small for 1/scale.
  std::vector<float> x(6 * 8, 0.0f);
  for (int i = 0; i < 8; ++i) x[i] = 3.25f;
  for (int i = 8; i < 48; ++i) x[i] = static_cast<float>(i) * 0.1f;
  x[11] = nan;
  x[20] = -inf;
  x[32] = 3e38f;
  x[33] = -3e38f;
  for (int i = 40; i < 48; ++i) x[i] = 1e-37f;
  x[41] = 1.05e-37f;  // range ~5e-39: 1 / scale overflows f32 for u8 and u4
  for (const Codec c : {Codec::kU8, Codec::kU4}) {
    const std::vector<std::byte> e = must_encode(x, c, 8);
    const std::vector<float> d = must_decode(e, x.size(), c, 8);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(d[i], 3.25f);
    for (int i = 8; i < 24; ++i) EXPECT_TRUE(std::isnan(d[i])) << i;  // whole NaN/Inf blocks
    for (int i = 24; i < 32; ++i) EXPECT_NEAR(d[i], x[i], 0.8f / (c == Codec::kU8 ? 255 : 15));
    for (int i = 32; i < 40; ++i) EXPECT_TRUE(std::isnan(d[i])) << i;  // range beyond FLT_MAX
    for (int i = 40; i < 48; ++i) EXPECT_EQ(d[i], 1e-37f);             // stored as constant lo
    // NaN blocks store the canonical quiet NaN and zero codes: the bytes are fixed.
    Result<BlockHeader> h = read_block_header(e, x.size(), c, 8, 1);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(h->lo), 0x7FC00000u);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(h->scale), 0x7FC00000u);
  }
}

TEST(QuantCodec, DeterministicAcrossCallsCopiesAndFpEnvironments) {
  std::vector<float> x = gaussian_with_outliers(100003, 1e-3, 100.0f, 11);
  x[5] = -0.0f;
  x[77] = std::numeric_limits<float>::denorm_min();
  for (const Codec c : kAllCodecs) {
    const std::vector<std::byte> a = must_encode(x, c, kDefaultBlock);
    const std::vector<std::byte> b = must_encode(x, c, kDefaultBlock);
    const std::vector<float> copy(x);
    const std::vector<std::byte> from_copy = must_encode(copy, c, kDefaultBlock);
    EXPECT_EQ(a, b) << codec_name(c);
    EXPECT_EQ(a, from_copy) << codec_name(c);
    // A sub-span starting at an odd element encodes like a copy of that range.
    const std::span<const float> tail(x.data() + 1, x.size() - 1);
    const std::vector<float> tail_copy(tail.begin(), tail.end());
    EXPECT_EQ(must_encode(tail, c, 64), must_encode(tail_copy, c, 64)) << codec_name(c);
#if defined(__x86_64__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u);  // a caller running with FTZ | DAZ
    std::vector<std::byte> ftz(a.size());
    const Status s = encode(x, ftz, c, kDefaultBlock);
    _mm_setcsr(saved);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(a, ftz) << codec_name(c);
#endif
  }
}

// Data that reaches every branch of the encoders: NaNs of both signs with payloads (quiet and
// signalling), infinities, signed zeros, f32 subnormals, f16 subnormals and the f16 overflow
// boundary, exact f16/bf16 ties, blocks whose codes are exact ties, constant blocks, blocks too
// narrow for 1/scale and blocks wider than FLT_MAX, and ordinary Gaussian blocks.
std::vector<float> adversarial_data(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float specials[] = {std::bit_cast<float>(0x7FC00000u),
                            std::bit_cast<float>(0xFFC12345u),
                            std::bit_cast<float>(0x7F800001u),
                            std::bit_cast<float>(0xFFA00000u),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -1e-40f,
                            65504.0f,
                            65519.996f,
                            65520.0f,
                            -65520.0f,
                            1e6f,
                            std::ldexp(1.0f, -24),
                            std::ldexp(1.0f, -25),
                            std::ldexp(3.0f, -26),
                            std::ldexp(1.0f, -14),
                            1.0f + std::ldexp(1.0f, -11),
                            1.0f + std::ldexp(3.0f, -11),
                            1.0f + std::ldexp(1.0f, -8),
                            3e38f,
                            -3e38f};
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t kind = (i / 64) % 6;  // the kind of a stretch of 64 elements
    if (kind == 0) {
      x[i] = normal(rng);
    } else if (kind == 1) {  // codes that are exact ties: lo 0, range 255 (u8) or 15 (u4)
      x[i] = static_cast<float>(rng() % 15) + 0.5f;
      if (i % 64 == 0) x[i] = 0.0f;
      if (i % 64 == 1) x[i] = (rng() % 2) ? 255.0f : 15.0f;
    } else if (kind == 2) {
      x[i] = 2.5f;  // constant
    } else if (kind == 3) {
      x[i] = 1e-37f + static_cast<float>(rng() % 2) * 1e-44f;  // 1/scale overflows
    } else if (kind == 4) {
      x[i] = normal(rng) * 1e4f;
      if (rng() % 8 == 0) x[i] = specials[rng() % std::size(specials)];
    } else {
      x[i] = specials[rng() % std::size(specials)];
    }
  }
  return x;
}

TEST(QuantCodec, VectorEncodersMatchThePortableLoopsBitForBit) {
  const std::vector<float> data = adversarial_data(37 * 128 + 77, 41);
  for (const std::size_t count :
       {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{127},
        std::size_t{129}, std::size_t{16 * 128 + 5}, data.size()}) {
    const std::span<const float> x(data.data(), count);
    for (const Codec c : kAllCodecs) {
      for (const std::size_t block :
           {std::size_t{128}, std::size_t{64}, std::size_t{7}, std::size_t{1000}}) {
        const std::vector<std::byte> fast = must_encode(x, c, block);
        std::vector<std::byte> portable(fast.size());
        ASSERT_TRUE(encode_portable(x, portable, c, block).is_ok());
        ASSERT_EQ(fast, portable) << codec_name(c) << " count " << count << " block " << block;
      }
    }
  }
}

// Decoding fp16 (vector path or not) is f16_to_f32 for every one of the 65536 bit patterns,
// signalling NaNs included, and its accumulate and residual forms add and subtract exactly that.
TEST(QuantCodec, Fp16DecodeIsTheConversionForEveryBitPattern) {
  constexpr std::size_t kPatterns = 65536 + 5;  // an odd tail for the vector path
  std::vector<std::byte> e(kPatterns * 2);
  for (std::size_t i = 0; i < kPatterns; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    std::memcpy(e.data() + 2 * i, &h, 2);
  }
  const std::vector<float> d = must_decode(e, kPatterns, Codec::kFp16, 0);
  const std::vector<float> acc0 = normal_data(kPatterns, 43);
  std::vector<float> acc(acc0);
  ASSERT_TRUE(decode_accumulate(e, acc, Codec::kFp16, 0).is_ok());
  for (std::size_t i = 0; i < kPatterns; ++i) {
    const float want = f16_to_f32(static_cast<std::uint16_t>(i));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(d[i]), std::bit_cast<std::uint32_t>(want)) << i;
    const float sum = acc0[i] + want;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(acc[i]), std::bit_cast<std::uint32_t>(sum)) << i;
  }
}

TEST(QuantCodec, DecodeAccumulateEqualsDecodeThenAdd) {
  const std::vector<float> x = normal_data(1000 + 7, 21);
  const std::vector<float> acc0 = normal_data(x.size(), 22);
  for (const Codec c : kAllCodecs) {
    const std::vector<std::byte> e = must_encode(x, c, 64);
    const std::vector<float> d = must_decode(e, x.size(), c, 64);
    std::vector<float> acc(acc0);
    ASSERT_TRUE(decode_accumulate(e, acc, c, 64).is_ok());
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(acc[i], acc0[i] + d[i]) << codec_name(c);
  }
}

TEST(QuantCodec, SizeMismatchIsAnErrorAndWritesNothing) {
  const std::vector<float> x(100, 1.0f);
  std::vector<std::byte> out(*encoded_size(100, Codec::kU8) + 1, std::byte{0xAB});
  EXPECT_EQ(encode(x, out, Codec::kU8).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out[0], std::byte{0xAB});
  std::vector<float> d(99, 7.0f);
  out.resize(*encoded_size(100, Codec::kU8));
  EXPECT_EQ(decode(out, d, Codec::kU8).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(decode_accumulate(out, d, Codec::kU8).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(d[0], 7.0f);
  std::vector<float> residual(99);
  EXPECT_EQ(encode_with_error_feedback(x, residual, out, Codec::kU8).code(),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(read_block_header(out, 100, Codec::kFp16, 128, 0).status().code(),
            LH_ERR_INVALID_ARGUMENT);
}

// Sending the same vector T times: without feedback the quantization error adds up (the same
// rounding every time), with feedback the sum of what was sent stays within one step of T * x.
TEST(QuantCodec, ErrorFeedbackBoundsAccumulatedError) {
  const std::vector<float> x = normal_data(4096 + 5, 31);
  for (const Codec c : {Codec::kU8, Codec::kU4, Codec::kE3M0, Codec::kFp16, Codec::kBf16}) {
    const int steps = 50;
    std::vector<float> residual(x.size(), 0.0f);
    std::vector<double> sent_fb(x.size(), 0.0);
    std::vector<double> sent_plain(x.size(), 0.0);
    std::vector<std::byte> e(*encoded_size(x.size(), c));
    std::vector<float> d(x.size());
    for (int t = 0; t < steps; ++t) {
      ASSERT_TRUE(encode_with_error_feedback(x, residual, e, c).is_ok());
      ASSERT_TRUE(decode(e, d, c).is_ok());
      for (std::size_t i = 0; i < x.size(); ++i) sent_fb[i] += d[i];
      ASSERT_TRUE(encode(x, e, c).is_ok());
      ASSERT_TRUE(decode(e, d, c).is_ok());
      for (std::size_t i = 0; i < x.size(); ++i) sent_plain[i] += d[i];
    }
    double err_fb = 0;
    double err_plain = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = steps * static_cast<double>(x[i]);
      err_fb += (sent_fb[i] - want) * (sent_fb[i] - want);
      err_plain += (sent_plain[i] - want) * (sent_plain[i] - want);
    }
    err_fb = std::sqrt(err_fb);
    err_plain = std::sqrt(err_plain);
    std::printf("error feedback %s: accumulated L2 error over %d steps %.4g, without %.4g\n",
                std::string(codec_name(c)).c_str(), steps, err_fb, err_plain);
    EXPECT_LT(err_fb * 10, err_plain) << codec_name(c);
  }
  // The residual of one call is exactly (input + old residual) - decoded, for every codec and for
  // block sizes with and without a compile-time specialisation.
  const std::vector<float> r0 = normal_data(x.size(), 32, 0.01f);
  std::vector<float> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = x[i] + r0[i];
  for (const Codec c : kAllCodecs) {
    for (const std::size_t block : {std::size_t{64}, std::size_t{128}, std::size_t{100}}) {
      std::vector<float> residual(r0);
      std::vector<std::byte> e(*encoded_size(x.size(), c, block));
      ASSERT_TRUE(encode_with_error_feedback(x, residual, e, c, block).is_ok());
      EXPECT_EQ(must_encode(v, c, block), e) << codec_name(c) << " block " << block;
      std::vector<std::byte> portable(e.size());
      ASSERT_TRUE(encode_portable(v, portable, c, block).is_ok());
      EXPECT_EQ(portable, e) << codec_name(c) << " block " << block;
      const std::vector<float> d = must_decode(e, x.size(), c, block);
      for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(residual[i], v[i] - d[i]);
    }
  }
}

TEST(QuantCodec, ErrorFeedbackResetsNonFiniteResidual) {
  std::vector<float> x(256, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> residual(256, 0.0f);
  std::vector<std::byte> e(*encoded_size(256, Codec::kU8));
  ASSERT_TRUE(encode_with_error_feedback(x, residual, e, Codec::kU8).is_ok());
  for (const float r : residual) ASSERT_TRUE(std::isfinite(r));
}

// The headline number: blockwise u8 beside one min-max scale for the whole chunk, on Gaussian
// data with 0.01% outliers of magnitude 100.
TEST(QuantCodec, BlockwiseBeatsChunkMinMaxOnOutliers) {
  const std::vector<float> x = gaussian_with_outliers(1u << 20, 1e-4, 100.0f, 2024);
  Result<QuantErrorReport> r = quant_error_report(x, kDefaultBlock);
  ASSERT_TRUE(r.is_ok());
  std::printf(
      "relative L2 error, 1M N(0,1) + 0.01%% outliers of 100, block %zu:\n"
      "  u8 blockwise %.5f  u4 blockwise %.5f  u8 chunk_minmax %.5f  ratio u8/chunk %.4f\n",
      kDefaultBlock, r->u8_blockwise, r->u4_blockwise, r->u8_chunk, r->ratio);
  EXPECT_LE(r->ratio, 0.25);
  EXPECT_GT(r->u8_blockwise, 0.0);
  EXPECT_LT(r->u8_blockwise, r->u4_blockwise);
  Result<QuantErrorReport> r64 = quant_error_report(x, 64);
  ASSERT_TRUE(r64.is_ok());
  std::printf("  block 64: u8 %.5f  u4 %.5f  ratio %.4f\n", r64->u8_blockwise, r64->u4_blockwise,
              r64->ratio);
  EXPECT_LE(r64->ratio, 0.25);
}

}  // namespace
}  // namespace longhaul::quant
