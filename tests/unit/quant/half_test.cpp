// f16 / bf16 conversions against the scalar references in reference.hpp: every f16 pattern, every
// midpoint between neighbouring f16 values (the ties), and a spread of random floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "quant/half.hpp"
#include "reference.hpp"

namespace longhaul::quant {
namespace {

using testing::ref_bf16_value;
using testing::ref_f16_value;
using testing::ref_f32_to_bf16;
using testing::ref_f32_to_f16;

float next_up(float f) {
  return std::nextafter(f, HUGE_VALF);
}
float next_down(float f) {
  return std::nextafter(f, -HUGE_VALF);
}

TEST(QuantHalf, F16ToF32IsExactForEveryPattern) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto p = static_cast<std::uint16_t>(h);
    const float f = f16_to_f32(p);
    const double want = ref_f16_value(p);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      EXPECT_EQ(static_cast<double>(f), want) << std::hex << h;
      EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    }
  }
}

TEST(QuantHalf, F16RoundTripAndNanCanonical) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto p = static_cast<std::uint16_t>(h);
    const std::uint16_t back = f32_to_f16(f16_to_f32(p));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    EXPECT_EQ(back, nan ? static_cast<std::uint16_t>((h & 0x8000) | 0x7E00) : p) << std::hex << h;
  }
}

// Every midpoint between two neighbouring positive finite f16 values is exactly representable in
// f32; it must round to the even pattern, and one f32 ulp either side to the nearer one.
TEST(QuantHalf, F16TiesAndNeighboursOfTies) {
  for (std::uint32_t h = 0; h < 0x7BFF; ++h) {
    const double a = ref_f16_value(static_cast<std::uint16_t>(h));
    const double b = ref_f16_value(static_cast<std::uint16_t>(h + 1));
    const auto mid = static_cast<float>((a + b) / 2);
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    for (const float f : {mid, next_up(mid), next_down(mid), -mid, -next_up(mid)}) {
      EXPECT_EQ(f32_to_f16(f), ref_f32_to_f16(f)) << f;
    }
    const std::uint16_t even =
        (h & 1) == 0 ? static_cast<std::uint16_t>(h) : static_cast<std::uint16_t>(h + 1);
    EXPECT_EQ(f32_to_f16(mid), even);
  }
  // The overflow threshold: 65504 + half an ulp (65520) goes to Inf, just below stays finite.
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(next_down(65520.0f)), 0x7BFF);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16(HUGE_VALF), 0x7C00);
  // Below half the smallest subnormal: zero with the sign; exactly half: ties to even (zero).
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(next_up(std::ldexp(1.0f, -25))), 0x0001);
  EXPECT_EQ(f32_to_f16(-1e-30f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0x00000001u)), 0x0000);  // f32 subnormal
}

TEST(QuantHalf, RandomFloatsMatchReference) {
  std::mt19937 gen(7);
  auto rng = [&gen] { return static_cast<std::uint32_t>(gen()); };
  // Exponents from deep subnormal f16 range to beyond f16 range, random mantissas and signs.
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t exp = 127 - 30 + rng() % 50;
    const std::uint32_t bits = (rng() & 0x80000000u) | (exp << 23) | (rng() & 0x7FFFFFu);
    const float f = std::bit_cast<float>(bits);
    ASSERT_EQ(f32_to_f16(f), ref_f32_to_f16(f)) << std::hexfloat << f;
  }
  // Whole f32 range for bf16.
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(rng());
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), ref_f32_to_bf16(f)) << std::hexfloat << f;
  }
}

TEST(QuantHalf, Bf16TiesAndSpecials) {
  // 1 + 2^-8 is the midpoint between bf16 1.0 (0x3F80) and 1 + 2^-7 (0x3F81): ties to even.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(f32_to_bf16(next_up(1.0f + std::ldexp(1.0f, -8))), 0x3F81);
  // 1 + 3 * 2^-8 is the midpoint between 0x3F81 and 0x3F82: ties to the even 0x3F82.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(f32_to_bf16(3.4028235e38f), 0x7F80);  // FLT_MAX is past bf16's largest + half ulp
  EXPECT_EQ(f32_to_bf16(-HUGE_VALF), 0xFF80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // signalling -> quiet
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0xFFC12345u)), 0xFFC1);
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto p = static_cast<std::uint16_t>(b);
    const float f = bf16_to_f32(p);
    if (std::isnan(f)) continue;
    EXPECT_EQ(static_cast<double>(f), ref_bf16_value(p));
    EXPECT_EQ(f32_to_bf16(f), p);
  }
}

}  // namespace
}  // namespace longhaul::quant
