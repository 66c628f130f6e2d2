// The sparse top-k codec (issue 48, part 1): golden bytes, the reference of sparse_test_util.hpp
// bit for bit on random and adversarial inputs over several rounds of error feedback, sent + kept
// == total exactly, ties by index, short chunks, k >= chunk, NaN/Inf refused, the FP environment,
// and the codec ratio at chunk 4096, k 64.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "quant/error_report.hpp"
#include "sparse_test_util.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace longhaul::quant::sparse {
namespace {

using testing::bits_of;
using testing::decode_ok;
using testing::encode_and_check;
using testing::encode_ok;

std::vector<std::byte> to_bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}

TEST(SparseCodec, GoldenBytes) {
  // Chunk 4 (2 index bits), k 2, decay 1. Chunk 0: S = 2, candidates |t| >= 0.5 are 0.5, -2 and 1;
  // the top 2 are -2 (code 3: -S) and 1 (code 0: +S/2, below 3S/4 = 1.5). Chunk 1 (short, 3
  // elements) ties at 3: the two lowest indices, code 1 (+S).
  const std::vector<float> in = {0.5f, -2.0f, 1.0f, 0.1f, 3.0f, 3.0f, 3.0f};
  std::vector<float> residual(in.size(), 0.0f);
  const Params p{.chunk = 4, .topk = 2, .decay = 1.0f};
  std::vector<std::byte> bytes;
  encode_and_check(in, residual, p, &bytes);
  const std::vector<std::byte> want = to_bytes({
      'L',  'H',  'S', 'P', 1,    2, 0, 0,  // magic, version, index bits, reserved
      4,    0,    0,   0,   2,    0, 0, 0,  // chunk, topk
      7,    0,    0,   0,   0,    0, 0, 0,  // count
      0x00, 0x40, 2,   0,   0x2D,           // S = bf16 2.0, 2 entries: (1, code 3), (2, code 0)
      0x40, 0x40, 2,   0,   0x54,           // S = bf16 3.0, 2 entries: (0, code 1), (1, code 1)
  });
  EXPECT_EQ(bytes, want);
  EXPECT_EQ(decode_ok(bytes, in.size()),
            (std::vector<float>{0.0f, -2.0f, 1.0f, 0.0f, 3.0f, 3.0f, 0.0f}));
  EXPECT_EQ(residual, (std::vector<float>{0.5f, 0.0f, 0.0f, 0.1f, 0.0f, 0.0f, 3.0f}));
}

TEST(SparseCodec, LevelsAndTheCandidateFloorAtTheirExactBoundaries) {
  // max |t| = 1 + 2^-8 truncates to S = 1: 3S/4 = 0.75 goes up to S, the float below it to S/2,
  // S/4 = 0.25 is sent as S/2, the float below it is not sent.
  const float below_75 = std::nextafter(0.75f, 0.0f);
  const float below_25 = std::nextafter(0.25f, 0.0f);
  const std::vector<float> in = {1.00390625f, 0.75f, below_75, 0.25f, below_25, -0.75f, 0.5f, 0};
  std::vector<float> residual(in.size(), 0.0f);
  std::vector<std::byte> bytes;
  encode_and_check(in, residual, Params{.chunk = 8, .topk = 8, .decay = 1.0f}, &bytes);
  EXPECT_EQ(decode_ok(bytes, in.size()),
            (std::vector<float>{1.0f, 1.0f, 0.5f, 0.5f, 0.0f, -1.0f, 0.5f, 0.0f}));
  EXPECT_EQ(residual, (std::vector<float>{0.00390625f, -0.25f, below_75 - 0.5f, -0.25f, below_25,
                                          0.25f, 0.0f, 0.0f}));
}

TEST(SparseCodec, MatchesTheReferenceOverRoundsOfErrorFeedback) {
  std::mt19937 rng(48);
  const Params cases[] = {{4096, 64, 0.95f}, {4096, 64, 1.0f},   {1000, 7, 0.5f}, {33, 3, 0.95f},
                          {1, 1, 0.95f},     {65535, 300, 0.0f}, {64, 64, 0.9f},  {8, 100, 0.95f}};
  for (const Params& p : cases) {
    SCOPED_TRACE(::testing::Message() << "chunk " << p.chunk << " k " << p.topk);
    const std::size_t n = 3 * p.chunk + (p.chunk > 1 ? p.chunk / 3 : 0);
    std::vector<float> residual(n, 0.0f);
    for (int round = 0; round < 4; ++round) {
      std::vector<float> in = gaussian_with_outliers(n, 1e-3, 50.0f, rng());
      encode_and_check(in, residual, p);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Inputs that reach every edge: magnitudes from denormals to near FLT_MAX in one chunk, signed
// zeros, equal values, exact ties at S/4 and 3S/4, bf16-truncation boundaries.
std::vector<float> adversarial(std::mt19937& rng, std::size_t n) {
  std::vector<float> v(n);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::normal_distribution<float> g;
  for (float& x : v) {
    switch (kind(rng)) {
      case 0:
        x = std::bit_cast<float>(any_bits(rng) & 0x807FFFFFu);
        break;  // denormal
      case 1:
        x = g(rng) * 1e37f;
        break;
      case 2:
        x = g(rng) * 1e-38f;
        break;
      case 3:
        x = (rng() & 1) ? -0.0f : 0.0f;
        break;
      case 4:
        x = 3.0f;
        break;
      case 5:
        x = 0.75f;
        break;  // 3S/4 when S = 1
      case 6:
        x = 0.25f;
        break;  // S/4
      case 7:
        x = std::bit_cast<float>(0x3F80FFFFu);
        break;  // truncates to S = 1
      default: {
        const std::uint32_t b = any_bits(rng);
        x = std::bit_cast<float>((b & 0x7F800000u) == 0x7F800000u ? b & 0xBFFFFFFFu : b);
      }
    }
  }
  return v;
}

TEST(SparseCodec, SentPlusKeptIsInputPlusDecayedResidualExactlyOnAdversarialInputs) {
  std::mt19937 rng(4807);
  for (const Params p : {Params{16, 4, 0.95f}, Params{4096, 64, 0.95f}, Params{7, 7, 1.0f}}) {
    std::vector<float> residual(5 * p.chunk + 3, 0.0f);
    for (int round = 0; round < 6; ++round) {
      std::vector<float> in = adversarial(rng, residual.size());
      // Keep totals finite: halve where input and decayed residual could overflow together.
      for (std::size_t i = 0; i < in.size(); ++i)
        if (std::fabs(in[i]) > 1e37f || std::fabs(residual[i]) > 1e37f) in[i] *= 0.25f;
      encode_and_check(in, residual, p);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(SparseCodec, AllZerosSendNothing) {
  const Params p;
  std::vector<float> in(3 * p.chunk + 5, 0.0f);
  in[7] = -0.0f;
  std::vector<float> residual(in.size(), 0.0f);
  std::vector<std::byte> bytes;
  encode_and_check(in, residual, p, &bytes);
  EXPECT_EQ(bytes.size(), kHeaderBytes + 4 * kRecordHeaderBytes);
  for (float r : residual) EXPECT_EQ(r, 0.0f);
}

TEST(SparseCodec, AllEqualValuesBreakTiesByTheLowerIndex) {
  for (float value : {1.0f, -7.5f, 1e-40f, FLT_MAX}) {
    std::vector<float> in(100, value);
    std::vector<float> residual(in.size(), 0.0f);
    const Params p{.chunk = 32, .topk = 5, .decay = 0.95f};
    std::vector<std::byte> bytes;
    encode_and_check(in, residual, p, &bytes);
    const std::vector<float> out = decode_ok(bytes, in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const bool sent = i % 32 < 5;
      EXPECT_EQ(out[i] != 0.0f, sent) << value << " at " << i;
    }
  }
}

TEST(SparseCodec, TopkAtLeastTheChunkSendsEveryCandidate) {
  std::mt19937 rng(1);
  std::vector<float> in = gaussian_with_outliers(1000, 0, 0, rng());
  std::vector<float> residual(in.size(), 0.0f);
  const Params p{.chunk = 256, .topk = 100000, .decay = 1.0f};
  std::vector<std::byte> bytes;
  encode_and_check(in, residual, p, &bytes);
  Result<Header> h = read_header(bytes);
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(h->topk, 256u);  // stored as min(topk, chunk)
  const std::vector<float> out = decode_ok(bytes, in.size());
  for (std::size_t base = 0; base < in.size(); base += 256) {
    float max_abs = 0;
    for (std::size_t i = base; i < std::min(base + 256, in.size()); ++i)
      max_abs = std::max(max_abs, std::fabs(in[i]));
    const float s = std::bit_cast<float>(bits_of(max_abs) & 0xFFFF0000u);
    for (std::size_t i = base; i < std::min(base + 256, in.size()); ++i)
      EXPECT_EQ(out[i] != 0.0f, std::fabs(in[i]) >= s / 4) << i;
  }
}

TEST(SparseCodec, ShortLastChunkAndTinyCounts) {
  std::mt19937 rng(2);
  for (std::size_t n : {1, 2, 63, 4095, 4097, 8191}) {
    std::vector<float> in = gaussian_with_outliers(n, 0, 0, rng());
    std::vector<float> residual(n, 0.0f);
    std::vector<std::byte> bytes;
    encode_and_check(in, residual, Params{}, &bytes);
    Result<std::size_t> max = max_encoded_size(n, Params{});
    ASSERT_TRUE(max.is_ok());
    EXPECT_LE(bytes.size(), *max);
  }
  std::vector<float> empty, empty_residual;
  std::vector<std::byte> bytes = encode_ok(empty, empty_residual, Params{});
  EXPECT_EQ(bytes.size(), kHeaderBytes);
  EXPECT_TRUE(decode(bytes, std::span<float>()).is_ok());
}

TEST(SparseCodec, HugeAndTinyMagnitudesKeepTheirLevels) {
  // One chunk with FLT_MAX: S = bf16-truncated FLT_MAX, the level S never overflows; a chunk of
  // denormals: S is a bf16 denormal and S/2 is exact.
  std::vector<float> in = {
      FLT_MAX, -FLT_MAX, 1.0f, FLT_MAX * 0.3f, std::numeric_limits<float>::denorm_min() * 3,
      -1e-45f, 1e-44f,   0.0f};
  std::vector<float> residual(in.size(), 0.0f);
  encode_and_check(in, residual, Params{.chunk = 4, .topk = 4, .decay = 0.95f});
  for (float r : residual) EXPECT_TRUE(std::isfinite(r));
}

TEST(SparseCodec, NanInfAndOverflowAreRefusedAndNothingIsWritten) {
  const Params p{.chunk = 8, .topk = 2, .decay = 1.0f};
  struct Case {
    float in;
    float residual;
    const char* says;
  };
  const Case cases[] = {{std::numeric_limits<float>::quiet_NaN(), 0, "input[5] is nan"},
                        {std::numeric_limits<float>::infinity(), 0, "input[5] is inf"},
                        {1.0f, -std::numeric_limits<float>::infinity(), "residual[5] is -inf"},
                        {FLT_MAX, FLT_MAX, "overflows"}};
  for (const Case& c : cases) {
    std::vector<float> in(20, 1.0f);
    std::vector<float> residual(20, 0.5f);
    in[5] = c.in;
    residual[5] = c.residual;
    const std::vector<float> residual_before = residual;
    std::vector<std::byte> out(*max_encoded_size(in.size(), p), std::byte{0xAB});
    Result<std::size_t> r = encode_with_error_feedback(in, residual, out, p);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), LH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
    EXPECT_EQ(std::memcmp(residual.data(), residual_before.data(), 20 * sizeof(float)), 0);
    for (std::byte b : out) EXPECT_EQ(b, std::byte{0xAB});
  }
}

TEST(SparseCodec, BadParametersAndSizesAreRefused) {
  std::vector<float> in(10, 1.0f), residual(10, 0.0f), short_residual(9, 0.0f);
  std::vector<std::byte> out(1000);
  for (const Params p : {Params{0, 64, 0.9f}, Params{kMaxChunk + 1, 64, 0.9f}, Params{64, 0, 0.9f},
                         Params{64, 8, -0.1f}, Params{64, 8, 1.5f},
                         Params{64, 8, std::numeric_limits<float>::quiet_NaN()}}) {
    EXPECT_EQ(encode_with_error_feedback(in, residual, out, p).status().code(),
              LH_ERR_INVALID_ARGUMENT);
  }
  EXPECT_FALSE(encode_with_error_feedback(in, short_residual, out, Params{}).is_ok());
  std::vector<std::byte> tiny(10);
  EXPECT_FALSE(encode_with_error_feedback(in, residual, tiny, Params{}).is_ok());
  std::vector<std::byte> bytes = encode_ok(in, residual, Params{});
  std::vector<float> wrong(11);
  EXPECT_EQ(decode(bytes, wrong).code(), LH_ERR_INVALID_ARGUMENT);
}

TEST(SparseCodec, DecodeAccumulateAddsOnlyTheSentElements) {
  std::mt19937 rng(3);
  std::vector<float> in = gaussian_with_outliers(10000, 0, 0, rng());
  std::vector<float> residual(in.size(), 0.0f);
  const std::vector<std::byte> bytes = encode_ok(in, residual, Params{});
  const std::vector<float> decoded = decode_ok(bytes, in.size());
  std::vector<float> acc = gaussian_with_outliers(in.size(), 0, 0, rng());
  const std::vector<float> before = acc;
  ASSERT_TRUE(decode_accumulate(bytes, acc).is_ok());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const float want = decoded[i] != 0.0f ? before[i] + decoded[i] : before[i];
    EXPECT_EQ(bits_of(acc[i]), bits_of(want)) << i;
  }
}

#if defined(__x86_64__)
TEST(SparseCodec, SameBytesUnderTheCallersFtzDaz) {
  std::mt19937 rng(4);
  std::vector<float> in = adversarial(rng, 5000);
  for (float& x : in) x *= 1e-30f;  // many subnormal totals and levels
  std::vector<float> r1(in.size(), 1e-39f), r2 = r1;
  const std::vector<std::byte> plain = encode_ok(in, r1, Params{});
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
  const std::vector<std::byte> flushed = encode_ok(in, r2, Params{});
  _mm_setcsr(saved);
  EXPECT_EQ(plain, flushed);
  EXPECT_EQ(std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(float)), 0);
}
#endif

// One contribution's f32 bytes over its encoded bytes (issue 48: >= 140 at chunk 4096, k 64), for
// the benchmark's DiLoCo fragment (1,058,400 elements) and 1M elements. N(0, 1) data fills every
// chunk with 64 entries, the floor of the ratio; with outliers of 100 a chunk holding one sends
// only the values above a quarter of it, so the ratio is higher (printed, not asserted).
TEST(SparseCodec, CodecRatioAtChunk4096Top64) {
  for (std::size_t n : {std::size_t{1058400}, std::size_t{1} << 20}) {
    for (double outliers : {0.0, 1e-4}) {
      std::vector<float> in = gaussian_with_outliers(n, outliers, 100.0f, 5);
      std::vector<float> residual(n, 0.0f);
      const std::vector<std::byte> bytes = encode_ok(in, residual, Params{});
      const double ratio =
          static_cast<double>(n * sizeof(float)) / static_cast<double>(bytes.size());
      std::printf("sparse_codec_ratio %zu elements, outlier fraction %g: %zu bytes, %.2f\n", n,
                  outliers, bytes.size(), ratio);
      EXPECT_GE(ratio, 140.0);
    }
  }
}

}  // namespace
}  // namespace longhaul::quant::sparse
