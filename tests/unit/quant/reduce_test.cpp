// reduce_into / finalize_avg / accumulate_f32 / store_from_f32 against scalar references written
// from the definitions, for every dtype x op, at sizes that exercise the vector loops' tails.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "quant/half.hpp"
#include "quant/reduce.hpp"
#include "reference.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace longhaul::quant {
namespace {

using testing::ref_f16_value;
using testing::ref_f32_to_bf16;
using testing::ref_f32_to_f16;

constexpr DType kAllTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                               DType::kU8,  DType::kI32, DType::kU32, DType::kI64,  DType::kU64};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kProd};

// ---- references ----------------------------------------------------------------------------

// Integers: the operation on the values as 64-bit unsigned, reduced modulo 2^bits.
template <class T>
T ref_int(T a, T b, ReduceOp op) {
  using U = std::make_unsigned_t<T>;
  const std::uint64_t ua = static_cast<U>(a);
  const std::uint64_t ub = static_cast<U>(b);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return static_cast<T>(static_cast<U>(ua + ub));
    case ReduceOp::kProd:
      return static_cast<T>(static_cast<U>(ua * ub));
    case ReduceOp::kMin:
      return a < b ? a : b;
    case ReduceOp::kMax:
      return a > b ? a : b;
  }
  return 0;
}

// Floats: NaN on either side gives NaN for min/max; equal values give b (src).
template <class F>
F ref_fp(F a, F b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMin:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
      return a < b ? a : b;
    case ReduceOp::kMax:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
      return a > b ? a : b;
  }
  return 0;
}

template <class F>
bool same_float(F got, F want) {
  if (std::isnan(want)) return std::isnan(got);
  return std::memcmp(&got, &want, sizeof(F)) == 0;
}

bool same_half(std::uint16_t got, std::uint16_t want) {
  const bool got_nan = (got & 0x7C00) == 0x7C00 && (got & 0x3FF) != 0;
  const bool want_nan = (want & 0x7C00) == 0x7C00 && (want & 0x3FF) != 0;
  return want_nan ? got_nan : got == want;
}
bool same_bf16(std::uint16_t got, std::uint16_t want) {
  const bool got_nan = (got & 0x7F80) == 0x7F80 && (got & 0x7F) != 0;
  const bool want_nan = (want & 0x7F80) == 0x7F80 && (want & 0x7F) != 0;
  return want_nan ? got_nan : got == want;
}

// ---- random data -----------------------------------------------------------------------------

template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    for (T& x : v) x = static_cast<T>(rng());  // full range: sums and products wrap
  } else {
    std::normal_distribution<T> normal(0, 100);
    for (T& x : v) x = normal(rng);
    const T specials[] = {std::numeric_limits<T>::quiet_NaN(),
                          std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity(),
                          T(0),
                          -T(0),
                          std::numeric_limits<T>::denorm_min(),
                          std::numeric_limits<T>::max()};
    for (std::size_t i = 0; i < n; i += 5) v[i] = specials[(i / 5) % std::size(specials)];
  }
  return v;
}

std::vector<std::uint16_t> random_halves(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = static_cast<std::uint16_t>(rng());  // every pattern: NaN, Inf, subnormals
  return v;
}

// ---- the dtype x op sweep ------------------------------------------------------------------

template <class T>
void check_int(ReduceOp op, std::size_t n, std::mt19937_64& rng, DType dtype) {
  std::vector<T> a = random_values<T>(n, rng);
  const std::vector<T> b = random_values<T>(n, rng);
  std::vector<T> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = ref_int(a[i], b[i], op);
  ASSERT_TRUE(reduce_into(a.data(), b.data(), n, dtype, op).is_ok());
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], want[i]) << "i=" << i;
}

template <class F>
void check_fp(ReduceOp op, std::size_t n, std::mt19937_64& rng, DType dtype) {
  std::vector<F> a = random_values<F>(n, rng);
  std::vector<F> b = random_values<F>(n, rng);
  std::shuffle(b.begin(), b.end(), rng);  // specials meet ordinary values
  std::vector<F> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = ref_fp(a[i], b[i], op);
  ASSERT_TRUE(reduce_into(a.data(), b.data(), n, dtype, op).is_ok());
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same_float(a[i], want[i])) << "i=" << i << " got " << a[i] << " want " << want[i];
  }
}

void check_16(ReduceOp op, std::size_t n, std::mt19937_64& rng, DType dtype) {
  std::vector<std::uint16_t> a = random_halves(n, rng);
  const std::vector<std::uint16_t> b = random_halves(n, rng);
  std::vector<std::uint16_t> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (dtype == DType::kF16) {
      const auto fa = static_cast<float>(ref_f16_value(a[i]));
      const auto fb = static_cast<float>(ref_f16_value(b[i]));
      want[i] = ref_f32_to_f16(ref_fp(fa, fb, op));
    } else {
      const float fa = std::bit_cast<float>(static_cast<std::uint32_t>(a[i]) << 16);
      const float fb = std::bit_cast<float>(static_cast<std::uint32_t>(b[i]) << 16);
      want[i] = ref_f32_to_bf16(ref_fp(fa, fb, op));
    }
  }
  ASSERT_TRUE(reduce_into(a.data(), b.data(), n, dtype, op).is_ok());
  for (std::size_t i = 0; i < n; ++i) {
    const bool ok = dtype == DType::kF16 ? same_half(a[i], want[i]) : same_bf16(a[i], want[i]);
    ASSERT_TRUE(ok) << "i=" << i << std::hex << " got 0x" << a[i] << " want 0x" << want[i];
  }
}

TEST(QuantReduce, EveryTypeAndOpMatchesScalarReference) {
  std::mt19937_64 rng(1234);
  for (const DType t : kAllTypes) {
    for (const ReduceOp op : kAllOps) {
      for (const std::size_t n : {std::size_t{1}, std::size_t{17}, std::size_t{1003}}) {
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(t) << " " << reduce_op_name(op) << " n=" << n);
        switch (t) {
          case DType::kF32:
            check_fp<float>(op, n, rng, t);
            break;
          case DType::kF64:
            check_fp<double>(op, n, rng, t);
            break;
          case DType::kF16:
          case DType::kBF16:
            check_16(op, n, rng, t);
            break;
          case DType::kI8:
            check_int<std::int8_t>(op, n, rng, t);
            break;
          case DType::kU8:
            check_int<std::uint8_t>(op, n, rng, t);
            break;
          case DType::kI32:
            check_int<std::int32_t>(op, n, rng, t);
            break;
          case DType::kU32:
            check_int<std::uint32_t>(op, n, rng, t);
            break;
          case DType::kI64:
            check_int<std::int64_t>(op, n, rng, t);
            break;
          case DType::kU64:
            check_int<std::uint64_t>(op, n, rng, t);
            break;
        }
      }
    }
  }
}

TEST(QuantReduce, IntegerWraparound) {
  std::int8_t i8[] = {127, -128, 64};
  const std::int8_t i8b[] = {1, -1, 2};
  ASSERT_TRUE(reduce_into(i8, i8b, 3, DType::kI8, ReduceOp::kSum).is_ok());
  EXPECT_EQ(i8[0], -128);
  EXPECT_EQ(i8[1], 127);
  ASSERT_TRUE(reduce_into(i8, i8b, 3, DType::kI8, ReduceOp::kProd).is_ok());  // 66 * 2 wraps
  EXPECT_EQ(i8[2], static_cast<std::int8_t>(-124));

  std::uint8_t u8[] = {200};
  const std::uint8_t u8b[] = {100};
  ASSERT_TRUE(reduce_into(u8, u8b, 1, DType::kU8, ReduceOp::kSum).is_ok());
  EXPECT_EQ(u8[0], 44);

  std::int32_t i32[] = {std::numeric_limits<std::int32_t>::max(), 65536};
  const std::int32_t i32b[] = {1, 65536};
  ASSERT_TRUE(reduce_into(i32, i32b, 2, DType::kI32, ReduceOp::kSum).is_ok());
  EXPECT_EQ(i32[0], std::numeric_limits<std::int32_t>::min());
  ASSERT_TRUE(reduce_into(i32 + 1, i32b + 1, 1, DType::kI32, ReduceOp::kProd).is_ok());
  EXPECT_EQ(i32[1], 0);

  std::int64_t i64[] = {std::numeric_limits<std::int64_t>::max()};
  const std::int64_t i64b[] = {2};
  ASSERT_TRUE(reduce_into(i64, i64b, 1, DType::kI64, ReduceOp::kProd).is_ok());
  EXPECT_EQ(i64[0], -2);

  std::uint64_t u64[] = {std::numeric_limits<std::uint64_t>::max()};
  const std::uint64_t u64b[] = {3};
  ASSERT_TRUE(reduce_into(u64, u64b, 1, DType::kU64, ReduceOp::kSum).is_ok());
  EXPECT_EQ(u64[0], 2u);
}

TEST(QuantReduce, HalfPrecisionRoundsToNearestEven) {
  // f16 spacing at 2048 is 2: 2048 + 1 = 2049 is a tie -> 2048 (even); 2048 + 3 = 2051 -> 2052.
  std::uint16_t f16[] = {f32_to_f16(2048.0f), f32_to_f16(2048.0f), f32_to_f16(1.0f)};
  const std::uint16_t f16b[] = {f32_to_f16(1.0f), f32_to_f16(3.0f), f32_to_f16(0.0003f)};
  ASSERT_TRUE(reduce_into(f16, f16b, 3, DType::kF16, ReduceOp::kSum).is_ok());
  EXPECT_EQ(f16_to_f32(f16[0]), 2048.0f);
  EXPECT_EQ(f16_to_f32(f16[1]), 2052.0f);
  // 1 + 0.0003 is closer to 1 than to 1 + 2^-10 (0.000977): stays 1.
  EXPECT_EQ(f16_to_f32(f16[2]), 1.0f);
  // f16 overflow: 60000 + 60000 -> Inf.
  std::uint16_t big[] = {f32_to_f16(60000.0f)};
  ASSERT_TRUE(reduce_into(big, big, 1, DType::kF16, ReduceOp::kSum).is_ok());
  EXPECT_EQ(big[0], 0x7C00);

  // bf16 spacing at 256 is 2: 256 + 1 -> 256, 256 + 3 = 259 -> 260.
  std::uint16_t bf[] = {f32_to_bf16(256.0f), f32_to_bf16(256.0f)};
  const std::uint16_t bfb[] = {f32_to_bf16(1.0f), f32_to_bf16(3.0f)};
  ASSERT_TRUE(reduce_into(bf, bfb, 2, DType::kBF16, ReduceOp::kSum).is_ok());
  EXPECT_EQ(bf16_to_f32(bf[0]), 256.0f);
  EXPECT_EQ(bf16_to_f32(bf[1]), 260.0f);
}

TEST(QuantReduce, MinMaxPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float a[] = {nan, 1.0f, nan, 1.0f};
  const float b[] = {1.0f, nan, 2.0f, -2.0f};
  float c[] = {nan, 1.0f, nan, 1.0f};
  ASSERT_TRUE(reduce_into(a, b, 4, DType::kF32, ReduceOp::kMin).is_ok());
  ASSERT_TRUE(reduce_into(c, b, 4, DType::kF32, ReduceOp::kMax).is_ok());
  EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1]) && std::isnan(a[2]));
  EXPECT_EQ(a[3], -2.0f);
  EXPECT_TRUE(std::isnan(c[0]) && std::isnan(c[1]) && std::isnan(c[2]));
  EXPECT_EQ(c[3], 1.0f);
}

TEST(QuantReduce, FinalizeAvg) {
  std::int32_t i32[] = {-7, 7, 5, std::numeric_limits<std::int32_t>::min()};
  ASSERT_TRUE(finalize_avg(i32, 4, DType::kI32, 2).is_ok());
  EXPECT_EQ(i32[0], -3);  // truncation toward zero
  EXPECT_EQ(i32[1], 3);
  EXPECT_EQ(i32[2], 2);
  EXPECT_EQ(i32[3], std::numeric_limits<std::int32_t>::min() / 2);

  std::uint8_t u8[] = {255};
  ASSERT_TRUE(finalize_avg(u8, 1, DType::kU8, 300).is_ok());  // n beyond the type's range
  EXPECT_EQ(u8[0], 0);
  std::int8_t i8[] = {-128};
  ASSERT_TRUE(finalize_avg(i8, 1, DType::kI8, 3).is_ok());
  EXPECT_EQ(i8[0], -42);

  std::uint64_t u64[] = {std::numeric_limits<std::uint64_t>::max()};
  ASSERT_TRUE(finalize_avg(u64, 1, DType::kU64, 2).is_ok());
  EXPECT_EQ(u64[0], std::numeric_limits<std::uint64_t>::max() / 2);

  float f32[] = {1.0f, 10.0f};
  ASSERT_TRUE(finalize_avg(f32, 2, DType::kF32, 3).is_ok());
  EXPECT_EQ(f32[0], 1.0f / 3.0f);  // a true division, not a multiplication by 1/3
  EXPECT_EQ(f32[1], 10.0f / 3.0f);
  double f64[] = {1.0};
  ASSERT_TRUE(finalize_avg(f64, 1, DType::kF64, 3).is_ok());
  EXPECT_EQ(f64[0], 1.0 / 3.0);

  std::uint16_t f16[] = {f32_to_f16(1.0f)};
  ASSERT_TRUE(finalize_avg(f16, 1, DType::kF16, 3).is_ok());
  EXPECT_EQ(f16[0], ref_f32_to_f16(1.0f / 3.0f));
  std::uint16_t bf16[] = {f32_to_bf16(1.0f)};
  ASSERT_TRUE(finalize_avg(bf16, 1, DType::kBF16, 3).is_ok());
  EXPECT_EQ(bf16[0], ref_f32_to_bf16(1.0f / 3.0f));

  // kAvg in reduce_into is the sum; the average of {1, 2, 6} over 3 peers is 3.
  float acc[] = {1.0f};
  const float two[] = {2.0f};
  const float six[] = {6.0f};
  ASSERT_TRUE(reduce_into(acc, two, 1, DType::kF32, ReduceOp::kAvg).is_ok());
  ASSERT_TRUE(reduce_into(acc, six, 1, DType::kF32, ReduceOp::kAvg).is_ok());
  ASSERT_TRUE(finalize_avg(acc, 1, DType::kF32, 3).is_ok());
  EXPECT_EQ(acc[0], 3.0f);
}

TEST(QuantReduce, AccumulateAndStoreF32) {
  std::mt19937_64 rng(5);
  const std::size_t n = 1001;
  const std::vector<std::uint16_t> h = random_halves(n, rng);
  std::vector<float> acc(n, 0.5f);
  ASSERT_TRUE(accumulate_f32(acc.data(), h.data(), n, DType::kF16).is_ok());
  std::vector<float> bacc(n, 0.5f);
  ASSERT_TRUE(accumulate_f32(bacc.data(), h.data(), n, DType::kBF16).is_ok());
  for (std::size_t i = 0; i < n; ++i) {
    const float want = 0.5f + static_cast<float>(ref_f16_value(h[i]));
    ASSERT_TRUE(same_float(acc[i], want)) << i;
    const float bwant = 0.5f + std::bit_cast<float>(static_cast<std::uint32_t>(h[i]) << 16);
    ASSERT_TRUE(same_float(bacc[i], bwant)) << i;
  }
  std::vector<float> f(n, 1.0f);
  const std::vector<float> g = random_values<float>(n, rng);
  ASSERT_TRUE(accumulate_f32(f.data(), g.data(), n, DType::kF32).is_ok());
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same_float(f[i], 1.0f + g[i]));

  std::vector<std::uint16_t> out16(n);
  ASSERT_TRUE(store_from_f32(out16.data(), g.data(), n, DType::kF16).is_ok());
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same_half(out16[i], ref_f32_to_f16(g[i])));
  ASSERT_TRUE(store_from_f32(out16.data(), g.data(), n, DType::kBF16).is_ok());
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same_bf16(out16[i], ref_f32_to_bf16(g[i])));
  std::vector<float> out32(n);
  ASSERT_TRUE(store_from_f32(out32.data(), g.data(), n, DType::kF32).is_ok());
  EXPECT_EQ(std::memcmp(out32.data(), g.data(), n * sizeof(float)), 0);
}

// The f16 forms of accumulate_f32 and store_from_f32 (hardware conversions where the build has
// AVX-512) keep the bits of the library's portable conversions for every pattern, NaN payloads
// included: members built for different machines must combine to the same bits.
TEST(QuantReduce, F16AccumulateAndStoreKeepThePortableBits) {
  constexpr std::size_t kPatterns = 65536 + 3;
  std::vector<std::uint16_t> h(kPatterns);
  for (std::size_t i = 0; i < kPatterns; ++i) h[i] = static_cast<std::uint16_t>(i);
  // Finite accumulators: with two NaN operands, which payload an addition keeps depends on the
  // operand order a compiler picks, in any build.
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> acc0(kPatterns);
  for (float& x : acc0) x = normal(rng);
  std::vector<float> acc(acc0);
  ASSERT_TRUE(accumulate_f32(acc.data(), h.data(), kPatterns, DType::kF16).is_ok());
  std::vector<std::uint16_t> back(kPatterns);
  ASSERT_TRUE(store_from_f32(back.data(), acc.data(), kPatterns, DType::kF16).is_ok());
  for (std::size_t i = 0; i < kPatterns; ++i) {
    const float want = acc0[i] + f16_to_f32(h[i]);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(acc[i]), std::bit_cast<std::uint32_t>(want)) << i;
    ASSERT_EQ(back[i], f32_to_f16(want)) << i;
  }
}

// sum_widened against the calls it fuses (accumulate_f32 into a -0 accumulator, finalize_avg in
// f32, store_from_f32): dst takes every 16-bit pattern, the sources random patterns, with 1 to 3
// sources, sums and averages, a count whose tail is not a whole vector.
class HalfPrecision : public ::testing::TestWithParam<DType> {};

TEST_P(HalfPrecision, SumWidenedIsTheFusedAccumulateAverageAndStore) {
  const DType dtype = GetParam();
  constexpr std::size_t kCount = 65536 + 13;
  auto is_nan = [dtype](std::uint16_t h) {
    return dtype == DType::kF16 ? (h & 0x7FFF) > 0x7C00 : (h & 0x7FFF) > 0x7F80;
  };
  std::mt19937_64 rng(21);
  std::vector<std::uint16_t> dst0(kCount);
  for (std::size_t i = 0; i < kCount; ++i) dst0[i] = static_cast<std::uint16_t>(i);
  std::vector<std::vector<std::uint16_t>> sources(3, std::vector<std::uint16_t>(kCount));
  for (auto& src : sources)
    for (auto& x : src) x = static_cast<std::uint16_t>(rng());
  for (std::size_t k = 1; k <= sources.size(); ++k) {
    for (const std::size_t average_over : {std::size_t{1}, std::size_t{3}}) {
      std::vector<float> acc(kCount, -0.0f);
      ASSERT_TRUE(accumulate_f32(acc.data(), dst0.data(), kCount, dtype).is_ok());
      std::vector<const void*> pointers;
      for (std::size_t j = 0; j < k; ++j) {
        ASSERT_TRUE(accumulate_f32(acc.data(), sources[j].data(), kCount, dtype).is_ok());
        pointers.push_back(sources[j].data());
      }
      if (average_over > 1) {
        ASSERT_TRUE(finalize_avg(acc.data(), kCount, DType::kF32, average_over).is_ok());
      }
      std::vector<std::uint16_t> want(kCount);
      ASSERT_TRUE(store_from_f32(want.data(), acc.data(), kCount, dtype).is_ok());

      std::vector<std::uint16_t> got(dst0);
      ASSERT_TRUE(sum_widened(got.data(), pointers, kCount, dtype, average_over).is_ok());
      for (std::size_t i = 0; i < kCount; ++i) {
        // With two NaN operands, which payload an addition keeps is the compiler's choice of
        // operand order (see F16AccumulateAndStoreKeepThePortableBits); the result is a NaN.
        std::size_t nans = is_nan(dst0[i]);
        for (std::size_t j = 0; j < k; ++j) nans += is_nan(sources[j][i]);
        if (nans >= 2) {
          ASSERT_TRUE(is_nan(got[i]) && is_nan(want[i])) << i;
          continue;
        }
        ASSERT_EQ(got[i], want[i])
            << "element " << i << ", " << k << " sources, average over " << average_over;
      }
    }
  }
}

// min, max and prod of f16/bf16 bit for bit against the definition (widen both, combine in f32,
// round back; min/max select a where a wins or is NaN, else b): every 16-bit pattern as dst; as
// src its negation (+0 against -0, NaNs of both signs), itself (ties), or a random pattern. Only a
// product of two NaNs is compared for NaN-ness alone (its payload is the operand order's).
TEST_P(HalfPrecision, MinMaxAndProdKeepTheDefinitionsBits) {
  const DType dtype = GetParam();
  const bool f16 = dtype == DType::kF16;
  auto widen = [f16](std::uint16_t h) { return f16 ? f16_to_f32(h) : bf16_to_f32(h); };
  auto narrow = [f16](float x) { return f16 ? f32_to_f16(x) : f32_to_bf16(x); };
  constexpr std::size_t kCount = 65536 + 7;
  std::vector<std::uint16_t> a0(kCount), b(kCount);
  std::mt19937_64 rng(33);
  for (std::size_t i = 0; i < kCount; ++i) {
    a0[i] = static_cast<std::uint16_t>(i);
    b[i] = i % 4 == 0   ? static_cast<std::uint16_t>(a0[i] ^ 0x8000)
           : i % 4 == 1 ? a0[i]
                        : static_cast<std::uint16_t>(rng());
  }
  for (const ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd}) {
    std::vector<std::uint16_t> got(a0);
    ASSERT_TRUE(reduce_into(got.data(), b.data(), kCount, dtype, op).is_ok());
    for (std::size_t i = 0; i < kCount; ++i) {
      const float x = widen(a0[i]), y = widen(b[i]);
      float r;
      if (op == ReduceOp::kMin)
        r = (x < y || x != x) ? x : y;
      else if (op == ReduceOp::kMax)
        r = (x > y || x != x) ? x : y;
      else
        r = x * y;
      if (op == ReduceOp::kProd && x != x && y != y) {
        ASSERT_TRUE(std::isnan(widen(got[i]))) << i;
        continue;
      }
      ASSERT_EQ(got[i], narrow(r)) << reduce_op_name(op) << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, HalfPrecision, ::testing::Values(DType::kF16, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& param) {
                           return std::string(dtype_name(param.param));
                         });

TEST(QuantReduce, SumWidenedRefusesWhatItDoesNotServe) {
  std::uint16_t a[2] = {0x3C00, 0x3C00};
  const std::uint16_t b[2] = {0x3C00, 0x3C00};
  const void* one[] = {b};
  float f[2] = {1, 2};
  const void* f_source[] = {f};
  EXPECT_EQ(sum_widened(f, f_source, 2, DType::kF32, 1).code(), LH_ERR_UNSUPPORTED);
  EXPECT_EQ(sum_widened(a, one, 2, DType::kF16, 0).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sum_widened(a, one, 2, static_cast<DType>(10), 1).code(), LH_ERR_INVALID_ARGUMENT);
  const void* null_source[] = {nullptr};
  EXPECT_EQ(sum_widened(a, null_source, 2, DType::kF16, 1).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(a[0], 0x3C00);  // nothing written by a refused call
  ASSERT_TRUE(sum_widened(a, one, 2, DType::kF16, 1).is_ok());
  EXPECT_EQ(a[0], 0x4000);  // 1 + 1
}

TEST(QuantReduce, InvalidAndUnsupportedAreErrors) {
  float a[4] = {1, 2, 3, 4};
  const float b[4] = {1, 1, 1, 1};
  const auto bad_type = static_cast<DType>(10);
  const auto bad_op = static_cast<ReduceOp>(5);
  EXPECT_EQ(reduce_into(a, b, 4, bad_type, ReduceOp::kSum).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(a, b, 4, DType::kF32, bad_op).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(check_supported(bad_type, ReduceOp::kMin).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(nullptr, b, 4, DType::kF32, ReduceOp::kSum).code(),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(a, nullptr, 4, DType::kF32, ReduceOp::kSum).code(),
            LH_ERR_INVALID_ARGUMENT);
  // Misaligned for the element type.
  EXPECT_EQ(reduce_into(reinterpret_cast<char*>(a) + 1, b, 2, DType::kF32, ReduceOp::kSum).code(),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(finalize_avg(a, 4, DType::kF32, 0).code(), LH_ERR_INVALID_ARGUMENT);
  // Nothing was written by the failed calls.
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[3], 4.0f);
  // The f32 path serves f32/f16/bf16 only.
  std::int32_t i32[2] = {1, 2};
  float acc[2] = {0, 0};
  EXPECT_EQ(accumulate_f32(acc, i32, 2, DType::kI32).code(), LH_ERR_UNSUPPORTED);
  EXPECT_EQ(accumulate_f32(acc, i32, 2, DType::kF64).code(), LH_ERR_UNSUPPORTED);
  EXPECT_EQ(store_from_f32(i32, acc, 2, DType::kU32).code(), LH_ERR_UNSUPPORTED);
  EXPECT_EQ(acc[0], 0.0f);
  // Every valid pair is served; count 0 is a no-op even with null pointers.
  for (const DType t : kAllTypes) {
    for (const ReduceOp op : kAllOps) EXPECT_TRUE(check_supported(t, op).is_ok());
    EXPECT_TRUE(reduce_into(nullptr, nullptr, 0, t, ReduceOp::kSum).is_ok());
  }
}

#if defined(__x86_64__)
// A caller that flushes subnormals (torch.set_flush_denormal) must still get the default-env
// result, and get its own environment back.
TEST(QuantReduce, CallerFlushToZeroDoesNotChangeResults) {
  const float tiny = std::numeric_limits<float>::denorm_min() * 3;
  float a[] = {tiny};
  const float b[] = {tiny};
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
  const Status s = reduce_into(a, b, 1, DType::kF32, ReduceOp::kSum);
  const unsigned during = _mm_getcsr();
  _mm_setcsr(saved);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(a[0], tiny * 2);
  EXPECT_EQ(during & 0x8040u, 0x8040u);
}
#endif

}  // namespace
}  // namespace longhaul::quant
