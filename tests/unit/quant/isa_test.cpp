// Every ISA build of the kernels this CPU runs (common/cpu_isa.hpp, quant/kernels.hpp) against the
// scalar build, the reference, bit for bit: every codec's encode, decode, decode-accumulate,
// residual and error feedback, every reduction of every dtype, the f32 accumulator path and the
// half-precision sums. Peers on different CPUs run different builds, so any difference here is
// a θ_g that splits between them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <immintrin.h>

#include "common/cpu_isa.hpp"
#include "quant/codec.hpp"
#include "quant/kernels.hpp"
#include "quant/reduce.hpp"
#include "runnable_isas.hpp"

namespace longhaul::quant {
namespace {

constexpr Codec kCodecs[] = {Codec::kNone, Codec::kFp16, Codec::kBf16,
                             Codec::kU8,   Codec::kU4,   Codec::kE3M0};
constexpr std::size_t kBlocks[] = {128, 64, 7, 1000};
constexpr std::size_t kCounts[] = {1, 15, 16, 17, 127, 129, 16 * 128 + 5, 37 * 128 + 77};

// The ISAs to compare with the scalar build (empty on a CPU with nothing wider).
std::vector<Isa> wider_isas() {
  std::vector<Isa> isas = runnable_isas();
  isas.erase(isas.begin());
  return isas;
}

// Stretches of 64 values of one kind each: normal, exact ties, constant blocks, tiny ranges,
// subnormals, and the special values (NaNs with payloads, infinities, signed zeros, fp16
// boundaries, huge values) every few elements.
std::vector<float> adversarial(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::uint32_t special_bits[] = {0x7FC00000u, 0xFFC12345u, 0x7F800001u, 0xFFA00000u,
                                        0x7F800000u, 0xFF800000u, 0x00000000u, 0x80000000u,
                                        0x00000001u, 0x80400000u, 0x477FE000u, 0x477FEFFFu,
                                        0x477FF000u, 0xC77FF000u, 0x7F61B1E6u, 0xFF61B1E6u};
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch ((i / 64) % 6) {
      case 0:
        x[i] = normal(rng);
        break;
      case 1:
        x[i] = static_cast<float>(rng() % 15) + 0.5f;
        break;
      case 2:
        x[i] = 2.5f;
        break;
      case 3:
        x[i] = 1e-37f + static_cast<float>(rng() % 2) * 1e-44f;
        break;
      case 4:
        x[i] = std::ldexp(normal(rng), -130);
        break;
      default:
        x[i] = normal(rng) * 1e4f;
        if (rng() % 9 == 0) x[i] = std::bit_cast<float>(special_bits[rng() % 16]);
    }
  }
  return x;
}

std::vector<std::byte> encode_with(Isa isa, const std::vector<float>& x, std::size_t count,
                                   Codec codec, std::size_t block) {
  std::vector<std::byte> out(*encoded_size(count, codec, block));
  kernels_for(isa).encode(x.data(), count, out.data(), codec, block);
  return out;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(QuantIsa, ReportsWhatThisCpuRuns) {
  std::printf("cpu runs:");
  for (const Isa isa : runnable_isas()) std::printf(" %s", std::string(isa_name(isa)).c_str());
  const Result<Isa> selected = selected_isa();
  std::printf("; selected: %s\n",
              selected ? std::string(isa_name(selected.value())).c_str() : "(error)");
  EXPECT_TRUE(cpu_supports(Isa::kScalar));
  for (const Isa isa : kAllIsas) EXPECT_EQ(kernels_for(isa).isa, isa);
}

TEST(QuantIsa, NamesParseAndUnknownNamesAreRefused) {
  for (const Isa isa : kAllIsas) {
    const Result<Isa> parsed = parse_isa(isa_name(isa));
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(parsed.value(), isa);
  }
  for (const char* bad : {"", "AVX2", "sse2", "avx-512", "native"}) {
    const Result<Isa> parsed = parse_isa(bad);
    ASSERT_FALSE(parsed.is_ok()) << bad;
    EXPECT_EQ(parsed.status().code(), LH_ERR_INVALID_ARGUMENT);
  }
}

TEST(QuantIsa, SelectingAnIsaTheCpuCannotRunIsRefusedAndChangesNothing) {
  const Result<Isa> before = selected_isa();
  for (const Isa isa : kAllIsas) {
    if (cpu_supports(isa)) continue;
    const Status s = select_isa(isa);
    EXPECT_EQ(s.code(), LH_ERR_UNSUPPORTED) << s.to_string();
    EXPECT_EQ(selected_isa().is_ok(), before.is_ok());
    if (before.is_ok()) {
      EXPECT_EQ(selected_isa().value(), before.value());
    }
  }
}

// Run by ctest a second time with LONGHAUL_FORCE_ISA set to a name that is not an ISA
// (quant_isa_force_unknown): every kernel entry point must then fail, naming the variable, rather
// than fall back to some other path.
TEST(QuantIsaEnvironment, TheForcedIsaIsTheOneEveryEntryPointRuns) {
  const char* env = std::getenv("LONGHAUL_FORCE_ISA");
  std::vector<float> x(64, 1.0f);
  std::vector<std::byte> out(*encoded_size(x.size(), Codec::kU8));
  const Status s = encode(x, out, Codec::kU8);
  if (env == nullptr || *env == '\0') {
    EXPECT_TRUE(s.is_ok());
    EXPECT_EQ(selected_isa().value(), best_supported_isa());
    return;
  }
  const Result<Isa> forced = parse_isa(env);
  if (!forced.is_ok() || !cpu_supports(forced.value())) {
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("LONGHAUL_FORCE_ISA"), std::string::npos) << s.to_string();
    float acc = 0.0f;
    EXPECT_FALSE(accumulate_f32(&acc, x.data(), 1, DType::kF32).is_ok());
    return;
  }
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(selected_isa().value(), forced.value());
}

TEST(QuantIsa, EveryCodecEncodesTheSameBytesOnEveryIsa) {
  const std::vector<float> data = adversarial(37 * 128 + 77, 41);
  for (const Isa isa : wider_isas()) {
    for (const std::size_t count : kCounts) {
      for (const Codec c : kCodecs) {
        for (const std::size_t block : kBlocks) {
          ASSERT_EQ(encode_with(isa, data, count, c, block),
                    encode_with(Isa::kScalar, data, count, c, block))
              << isa_name(isa) << " " << codec_name(c) << " count " << count << " block " << block;
        }
      }
    }
  }
}

TEST(QuantIsa, EveryCodecDecodesAccumulatesAndSubtractsTheSameBitsOnEveryIsa) {
  const std::vector<float> data = adversarial(37 * 128 + 77, 43);
  // The accumulator holds no NaN (infinities it may): with NaNs on both sides of an addition,
  // which payload survives is up to the compiler's operand order, in any build.
  std::vector<float> base = adversarial(37 * 128 + 77, 47);
  for (float& v : base)
    if (std::isnan(v)) v = 0.5f;
  for (const Isa isa : wider_isas()) {
    for (const std::size_t count : kCounts) {
      for (const Codec c : kCodecs) {
        for (const std::size_t block : kBlocks) {
          const std::vector<std::byte> e = encode_with(Isa::kScalar, data, count, c, block);
          for (const Sink sink : {Sink::kStore, Sink::kAdd, Sink::kResidual}) {
            std::vector<float> want(base.begin(), base.begin() + static_cast<long>(count));
            std::vector<float> got(want);
            kernels_for(Isa::kScalar).decode(e.data(), count, want.data(), c, block, sink);
            kernels_for(isa).decode(e.data(), count, got.data(), c, block, sink);
            ASSERT_TRUE(same_bytes(got, want))
                << isa_name(isa) << " " << codec_name(c) << " count " << count << " block " << block
                << " sink " << static_cast<int>(sink);
          }
        }
      }
    }
  }
}

TEST(QuantIsa, ErrorFeedbackLeavesTheSameBytesAndResidualsOnEveryIsa) {
  const std::vector<float> data = adversarial(37 * 128 + 77, 53);
  const std::vector<float> residual0 = adversarial(37 * 128 + 77, 59);
  for (const Isa isa : wider_isas()) {
    for (const std::size_t count : kCounts) {
      for (const Codec c : kCodecs) {
        for (const std::size_t block : kBlocks) {
          std::vector<float> r_want(residual0.begin(),
                                    residual0.begin() + static_cast<long>(count));
          std::vector<float> r_got(r_want);
          std::vector<std::byte> e_want(*encoded_size(count, c, block));
          std::vector<std::byte> e_got(e_want.size());
          // Three rounds, so the residual each leaves is the next one's input.
          for (int round = 0; round < 3; ++round) {
            kernels_for(Isa::kScalar)
                .encode_with_error_feedback(data.data(), r_want.data(), count, e_want.data(), c,
                                            block);
            kernels_for(isa).encode_with_error_feedback(data.data(), r_got.data(), count,
                                                        e_got.data(), c, block);
            ASSERT_EQ(e_got, e_want) << isa_name(isa) << " " << codec_name(c) << " count " << count
                                     << " block " << block << " round " << round;
            ASSERT_TRUE(same_bytes(r_got, r_want))
                << isa_name(isa) << " " << codec_name(c) << " count " << count << " block " << block
                << " round " << round;
          }
        }
      }
    }
  }
}

// Random bit patterns of every width. Floats: a NaN on at most one side of each pair, because
// with NaNs on both sides IEEE 754 leaves open which payload an operation keeps, and compilers
// may order the operands either way in any build.
std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

bool is_nan_at(const std::vector<std::uint8_t>& v, std::size_t i, DType dtype) {
  switch (dtype) {
    case DType::kF32: {
      std::uint32_t u;
      std::memcpy(&u, v.data() + 4 * i, 4);
      return (u & 0x7FFFFFFFu) > 0x7F800000u;
    }
    case DType::kF64: {
      std::uint64_t u;
      std::memcpy(&u, v.data() + 8 * i, 8);
      return (u & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
    }
    case DType::kF16:
    case DType::kBF16: {
      std::uint16_t u;
      std::memcpy(&u, v.data() + 2 * i, 2);
      return dtype == DType::kF16 ? (u & 0x7FFF) > 0x7C00 : (u & 0x7FFF) > 0x7F80;
    }
    default:
      return false;
  }
}

// dst and src of `count` elements of dtype; where both would hold a NaN, src's becomes 1.0's
// bits (or an integer 1).
void operands(DType dtype, std::size_t count, std::uint64_t seed, std::vector<std::uint8_t>& dst,
              std::vector<std::uint8_t>& src) {
  const std::size_t size = element_size(dtype);
  dst = random_bytes(count * size, seed);
  src = random_bytes(count * size, seed + 1);
  for (std::size_t i = 0; i < count; ++i) {
    if (!is_nan_at(dst, i, dtype) || !is_nan_at(src, i, dtype)) continue;
    std::memset(src.data() + i * size, 0, size);
    src[i * size + size - 1] = dtype == DType::kBF16 ? 0x3F : 0x00;
    if (dtype == DType::kF16) src[i * size + 1] = 0x3C;
  }
}

constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                             DType::kU8,  DType::kI32, DType::kU32, DType::kI64,  DType::kU64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProd};

TEST(QuantIsa, EveryReductionOfEveryDtypeGivesTheSameBitsOnEveryIsa) {
  for (const Isa isa : wider_isas()) {
    for (const DType dtype : kDTypes) {
      for (const ReduceOp op : kOps) {
        for (const std::size_t count : {std::size_t{1}, std::size_t{17}, std::size_t{4099}}) {
          std::vector<std::uint8_t> dst;
          std::vector<std::uint8_t> src;
          operands(dtype, count, 100 + count, dst, src);
          std::vector<std::uint8_t> want(dst);
          std::vector<std::uint8_t> got(dst);
          kernels_for(Isa::kScalar).reduce_into(want.data(), src.data(), count, dtype, op);
          kernels_for(isa).reduce_into(got.data(), src.data(), count, dtype, op);
          ASSERT_EQ(got, want) << isa_name(isa) << " " << dtype_name(dtype) << " "
                               << reduce_op_name(op) << " count " << count;
          kernels_for(Isa::kScalar).finalize_avg(want.data(), count, dtype, 3);
          kernels_for(isa).finalize_avg(got.data(), count, dtype, 3);
          ASSERT_EQ(got, want) << isa_name(isa) << " finalize_avg " << dtype_name(dtype);
        }
      }
    }
  }
}

TEST(QuantIsa, TheF32AccumulatorAndHalfPrecisionSumsGiveTheSameBitsOnEveryIsa) {
  constexpr std::size_t kCount = 65536 + 13;
  for (const Isa isa : wider_isas()) {
    for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      std::vector<std::uint8_t> values;
      std::vector<std::uint8_t> unused;
      operands(dtype, kCount, 7, values, unused);
      std::mt19937_64 rng(9);
      std::normal_distribution<float> normal(0.0f, 100.0f);
      std::vector<float> acc0(kCount);
      for (float& x : acc0) x = normal(rng);  // finite, so one NaN operand at most
      std::vector<float> want(acc0);
      std::vector<float> got(acc0);
      kernels_for(Isa::kScalar).accumulate_f32(want.data(), values.data(), kCount, dtype);
      kernels_for(isa).accumulate_f32(got.data(), values.data(), kCount, dtype);
      ASSERT_TRUE(same_bytes(got, want)) << isa_name(isa) << " accumulate " << dtype_name(dtype);
      std::vector<std::uint8_t> stored_want(kCount * element_size(dtype));
      std::vector<std::uint8_t> stored_got(stored_want.size());
      kernels_for(Isa::kScalar).store_from_f32(stored_want.data(), want.data(), kCount, dtype);
      kernels_for(isa).store_from_f32(stored_got.data(), want.data(), kCount, dtype);
      ASSERT_EQ(stored_got, stored_want) << isa_name(isa) << " store " << dtype_name(dtype);
    }
    for (const DType dtype : {DType::kF16, DType::kBF16}) {
      // dst and three sources; NaNs only in dst, so no sum has two.
      std::vector<std::uint8_t> dst0 = random_bytes(kCount * 2, 11);
      std::vector<std::vector<std::uint16_t>> sources(3, std::vector<std::uint16_t>(kCount));
      // Every bit pattern but NaNs: overflow to infinity across sources, subnormals, ties.
      std::mt19937_64 rng(13);
      for (auto& src : sources)
        for (auto& h : src) {
          do {
            h = static_cast<std::uint16_t>(rng());
          } while (dtype == DType::kF16 ? (h & 0x7FFF) > 0x7C00 : (h & 0x7FFF) > 0x7F80);
        }
      const void* pointers[] = {sources[0].data(), sources[1].data(), sources[2].data()};
      for (std::size_t k = 1; k <= 3; ++k) {
        for (const std::size_t average_over : {std::size_t{1}, std::size_t{3}}) {
          std::vector<std::uint8_t> want(dst0);
          std::vector<std::uint8_t> got(dst0);
          kernels_for(Isa::kScalar)
              .sum_widened(want.data(), pointers, k, kCount, dtype, average_over);
          kernels_for(isa).sum_widened(got.data(), pointers, k, kCount, dtype, average_over);
          ASSERT_EQ(got, want) << isa_name(isa) << " sum_widened " << dtype_name(dtype)
                               << " sources " << k << " average " << average_over;
        }
      }
    }
  }
}

// Arbitrary bytes, as a damaged or hostile message would bring them: every build decodes them to
// the same values (headers of any bits: NaNs with payloads, infinities, subnormal scales).
TEST(QuantIsa, ArbitraryBytesDecodeToTheSameValuesOnEveryIsa) {
  for (const Isa isa : wider_isas()) {
    for (const Codec c : kCodecs) {
      for (const std::size_t block : kBlocks) {
        const std::size_t count = 37 * 128 + 77;
        const std::vector<std::uint8_t> raw =
            random_bytes(*encoded_size(count, c, block), 61 + block);
        const auto* in = reinterpret_cast<const std::byte*>(raw.data());
        std::vector<float> want(count);
        std::vector<float> got(count);
        kernels_for(Isa::kScalar).decode(in, count, want.data(), c, block, Sink::kStore);
        kernels_for(isa).decode(in, count, got.data(), c, block, Sink::kStore);
        ASSERT_TRUE(same_bytes(got, want))
            << isa_name(isa) << " " << codec_name(c) << " block " << block;
      }
    }
  }
}

// The public entry points, each ISA selected in turn, from a caller running with FTZ and DAZ
// (they pin the default environment): the same bytes as the scalar kernels in that environment.
TEST(QuantIsa, ThePublicEntryPointsGiveTheSameBitsWithEveryIsaSelected) {
  const Result<Isa> before = selected_isa();
  ASSERT_TRUE(before.is_ok()) << before.status().to_string();
  const std::vector<float> data = adversarial(37 * 128 + 77, 67);
  std::vector<float> base = adversarial(37 * 128 + 77, 71);
  for (float& v : base)
    if (std::isnan(v)) v = 0.5f;
  std::vector<std::uint16_t> halves(data.size());
  for (std::size_t i = 0; i < data.size(); ++i)
    halves[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(data[i]) >> 16);
  auto run_all = [&](Codec c) {
    std::vector<std::byte> e(*encoded_size(data.size(), c));
    EXPECT_TRUE(encode(data, e, c).is_ok());
    std::vector<float> acc(base);
    EXPECT_TRUE(decode_accumulate(e, acc, c).is_ok());
    std::vector<float> residual(data.size(), 0.0f);
    std::vector<std::byte> fed(e.size());
    EXPECT_TRUE(encode_with_error_feedback(data, residual, fed, c).is_ok());
    std::vector<std::uint16_t> sum(halves);
    const void* sources[] = {halves.data()};
    EXPECT_TRUE(sum_widened(sum.data(), sources, halves.size(), DType::kBF16, 3).is_ok());
    return std::make_tuple(e, acc, residual, fed, sum);
  };
  const unsigned saved = _mm_getcsr();
  for (const Codec c : kCodecs) {
    ASSERT_TRUE(select_isa(Isa::kScalar).is_ok());
    _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
    const auto want = run_all(c);
    _mm_setcsr(saved);
    for (const Isa isa : wider_isas()) {
      ASSERT_TRUE(select_isa(isa).is_ok());
      _mm_setcsr(saved | 0x8040u);
      const auto got = run_all(c);
      _mm_setcsr(saved);
      EXPECT_EQ(std::get<0>(got), std::get<0>(want)) << isa_name(isa) << " " << codec_name(c);
      EXPECT_TRUE(same_bytes(std::get<1>(got), std::get<1>(want))) << isa_name(isa);
      EXPECT_TRUE(same_bytes(std::get<2>(got), std::get<2>(want))) << isa_name(isa);
      EXPECT_EQ(std::get<3>(got), std::get<3>(want)) << isa_name(isa) << " " << codec_name(c);
      EXPECT_EQ(std::get<4>(got), std::get<4>(want)) << isa_name(isa);
    }
  }
  ASSERT_TRUE(select_isa(before.value()).is_ok());
}

}  // namespace
}  // namespace longhaul::quant
