// The Rademacher perturbation (src/rng/perturbation.hpp): every ISA build this CPU runs gives the
// bits of an independent reference written from the documented sign layout, for random streams,
// lengths (around the vector widths) and offsets; slices equal the whole; perturb, perturbed_copy
// and apply_update are the single additions they promise; what perturb-then-unperturb restores.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <immintrin.h>

#include "isa_scope.hpp"
#include "rng/perturbation.hpp"
#include "rng/philox.hpp"

namespace longhaul::rng {
namespace {

// z_i from stream.hpp's layout and perturbation.hpp's sign layout, element by element.
float reference_z(const StreamId& id, std::uint64_t i) {
  const PhiloxStream s = derive_stream(id);
  const PhiloxBlock b = philox4x32_10({{static_cast<std::uint32_t>(i / 128), s.counter_high[0],
                                        s.counter_high[1], s.counter_high[2]}},
                                      {{s.key[0], s.key[1]}});
  return (b.w[(i / 32) % 4] >> (i % 32)) & 1u ? -1.0f : 1.0f;
}

StreamId random_id(std::mt19937_64& rng) {
  return {rng(), rng(), rng(), static_cast<std::uint32_t>(rng())};
}

// Normal weights with the values that trip vector code: subnormals, signed zeros, huge values.
std::vector<float> random_theta(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const float special[] = {0.0f, -0.0f, 1e-40f, -1e-45f, 3e38f, -3e38f, 1.0f + 0x1p-23f};
  std::vector<float> theta(n);
  for (std::size_t i = 0; i < n; ++i) theta[i] = rng() % 11 == 0 ? special[rng() % 7] : normal(rng);
  return theta;
}

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// Whether a + b is an f32, by Knuth's TwoSum: its rounding error, computed exactly in f32 (round
// to nearest, finite sums), is zero. (A double sum cannot tell: 2^-10 - 2^-149 needs 140 bits.)
bool addition_is_exact(float a, float b) {
  const float s = a + b;
  const float bb = s - a;
  return std::isfinite(s) && (a - (s - bb)) + (b - bb) == 0.0f;
}

constexpr std::size_t kLengths[] = {1,   15,  16,  17,   31,   32,   33,
                                    127, 128, 129, 2047, 2048, 2049, 5013};
constexpr std::uint64_t kOffsets[] = {0, 1, 7, 31, 32, 33, 100, 2045, (1ull << 39) - 6000};

class PhiloxPerturbation : public ::testing::TestWithParam<Isa> {};

TEST_P(PhiloxPerturbation, FillEqualsTheSignLayoutAtEveryLengthAndOffset) {
  LH_SKIP_UNLESS_CPU_RUNS(GetParam());
  IsaScope scope(GetParam());
  ASSERT_TRUE(scope.ok());
  std::mt19937_64 rng(1);
  for (const std::size_t n : kLengths) {
    for (const std::uint64_t first : kOffsets) {
      const StreamId id = random_id(rng);
      std::vector<float> z(n, 7.0f);
      ASSERT_TRUE(fill_perturbation(id, first, z).is_ok());
      for (std::size_t j = 0; j < n; ++j)
        ASSERT_EQ(bits(z[j]), bits(reference_z(id, first + j)))
            << "n " << n << " first " << first << " j " << j;
    }
  }
}

TEST_P(PhiloxPerturbation, AnySliceEqualsTheSameElementsOfTheWhole) {
  LH_SKIP_UNLESS_CPU_RUNS(GetParam());
  IsaScope scope(GetParam());
  ASSERT_TRUE(scope.ok());
  std::mt19937_64 rng(2);
  const StreamId id = random_id(rng);
  std::vector<float> whole(20000);
  ASSERT_TRUE(fill_perturbation(id, 0, whole).is_ok());
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t a = rng() % whole.size();
    const std::size_t n = 1 + rng() % (whole.size() - a);
    std::vector<float> slice(n);
    ASSERT_TRUE(fill_perturbation(id, a, slice).is_ok());
    for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(bits(slice[j]), bits(whole[a + j]));
  }
}

// perturb, perturbed_copy and apply_update against theta + c * z computed here, one element at a
// time (c * z is exact: z is +-1), over coefficients of every kind.
TEST_P(PhiloxPerturbation, PerturbAndUpdateAreOneAdditionPerElement) {
  LH_SKIP_UNLESS_CPU_RUNS(GetParam());
  IsaScope scope(GetParam());
  ASSERT_TRUE(scope.ok());
  std::mt19937_64 rng(3);
  const float coefficients[] = {0x1p-10f, -1e-3f, 0.3f, 1e-41f, 3e38f, -0.0f};
  for (const std::size_t n : kLengths) {
    const std::uint64_t first = kOffsets[rng() % std::size(kOffsets)];
    const StreamId id = random_id(rng);
    const std::vector<float> theta = random_theta(n, rng);
    for (const float c : coefficients) {
      std::vector<float> perturbed = theta, copy(n), updated = theta;
      ASSERT_TRUE(perturb(id, first, perturbed, c).is_ok());
      ASSERT_TRUE(perturbed_copy(id, first, theta, copy, c).is_ok());
      ASSERT_TRUE(apply_update(id, first, updated, 0.5f, c).is_ok());
      const float step = 0.5f * c;
      for (std::size_t j = 0; j < n; ++j) {
        const float z = reference_z(id, first + j);
        ASSERT_EQ(bits(perturbed[j]), bits(theta[j] + c * z)) << "c " << c << " j " << j;
        ASSERT_EQ(bits(copy[j]), bits(perturbed[j]));
        ASSERT_EQ(bits(updated[j]), bits(theta[j] + (-step) * z));
      }
    }
  }
}

// A caller with flush-to-zero and denormals-are-zero set (torch.set_flush_denormal) gets the
// same bits as one in the default environment.
TEST_P(PhiloxPerturbation, CallersFlushToZeroChangesNoBit) {
  LH_SKIP_UNLESS_CPU_RUNS(GetParam());
  IsaScope scope(GetParam());
  ASSERT_TRUE(scope.ok());
  const StreamId id{9, 9, 9, 9};
  std::vector<float> theta(300, 3e-39f), flushed = theta;
  ASSERT_TRUE(perturb(id, 5, theta, 1e-39f).is_ok());
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
  const Status s = perturb(id, 5, flushed, 1e-39f);
  _mm_setcsr(saved);
  ASSERT_TRUE(s.is_ok());
  for (std::size_t j = 0; j < theta.size(); ++j) ASSERT_EQ(bits(flushed[j]), bits(theta[j]));
}

INSTANTIATE_TEST_SUITE_P(Philox, PhiloxPerturbation, ::testing::ValuesIn(kAllIsas), isa_param_name);

// What perturbation.hpp states: theta + c z - c z is theta exactly where theta + c z is exact
// (-0 coming back as +0), and not always elsewhere (so perturbed_copy is the exact route).
TEST(Philox, UnperturbRestoresThetaExactlyWhereTheSumIsExact) {
  std::mt19937_64 rng(4);
  const StreamId id{1, 2, 3, 4};
  const float eps = 0x1p-10f;
  std::vector<float> theta = random_theta(100000, rng);
  theta[0] = 1.0f + 0x1p-23f;  // + 1 rounds to 2 (ties to even): not restored with eps = 1
  std::vector<float> round_trip = theta;
  ASSERT_TRUE(perturb(id, 0, round_trip, eps).is_ok());
  ASSERT_TRUE(perturb(id, 0, round_trip, -eps).is_ok());
  std::size_t exact_sums = 0, restored_anyway = 0;
  for (std::size_t i = 0; i < theta.size(); ++i) {
    const bool sum_exact = addition_is_exact(theta[i], eps * reference_z(id, i));
    if (sum_exact) {
      ++exact_sums;
      // -0 + eps - eps is +0: the one value an exact sum does not give back.
      const float expected = bits(theta[i]) == 0x80000000u ? 0.0f : theta[i];
      ASSERT_EQ(bits(round_trip[i]), bits(expected)) << i;
    } else if (bits(round_trip[i]) == bits(theta[i])) {
      ++restored_anyway;
    }
  }
  EXPECT_LT(exact_sums, theta.size());  // N(0, 0.02) weights below 2^-10 lose bits
  std::printf("eps 2^-10 over N(0, 0.02): %zu of %zu sums exact; %zu others restored anyway\n",
              exact_sums, theta.size(), restored_anyway);
  std::vector<float> one = {theta[0]};
  const float z0 = reference_z(id, 0);
  ASSERT_TRUE(perturb(id, 0, one, z0).is_ok());  // theta + 1
  ASSERT_TRUE(perturb(id, 0, one, -z0).is_ok());
  EXPECT_NE(bits(one[0]), bits(theta[0]));
}

TEST(Philox, RefusesRangesCoefficientsAndSizesItCannotServe) {
  std::vector<float> x(10), y(9);
  const StreamId id{};
  EXPECT_EQ(fill_perturbation(id, kMaxPerturbationElements - 9, x).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(fill_perturbation(id, kMaxPerturbationElements - 10, x).is_ok());
  EXPECT_EQ(perturb(id, ~std::uint64_t{0}, x, 1.0f).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(perturb(id, 0, x, NAN).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(apply_update(id, 0, x, 3e38f, 3e38f).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(perturbed_copy(id, 0, x, y, 1.0f).code(), LH_ERR_INVALID_ARGUMENT);
}

// Different names give unrelated streams, each balanced: a mistake in the layout (a name that
// does not reach the counter) shows here as equal or correlated signs.
TEST(Philox, StreamsOfDifferentNamesAreBalancedAndUncorrelated) {
  constexpr std::size_t kN = 1 << 20;
  const StreamId base{42, 7, 3, 0};
  const StreamId others[] = {{43, 7, 3, 0}, {42, 8, 3, 0},          {42, 7, 4, 0},
                             {42, 7, 3, 1}, {42, 7ull << 32, 3, 0}, {42, 7, 3ull << 32, 0}};
  std::vector<float> z(kN), w(kN);
  ASSERT_TRUE(fill_perturbation(base, 0, z).is_ok());
  double sum = 0;
  for (const float v : z) sum += v;
  EXPECT_LT(std::abs(sum), 5 * std::sqrt(double{kN}));  // 5 sigma
  for (const StreamId& other : others) {
    ASSERT_TRUE(fill_perturbation(other, 0, w).is_ok());
    double dot = 0;
    for (std::size_t i = 0; i < kN; ++i) dot += z[i] * w[i];
    EXPECT_LT(std::abs(dot), 5 * std::sqrt(double{kN})) << other.seed << " " << other.step;
  }
}

}  // namespace
}  // namespace longhaul::rng
