// The one-byte code of the projected gradient (src/rng/onebyte.hpp): round trip, clamps, ties,
// -128 refused with its contributor named, exact decoding, and the scale rule every peer applies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "rng/onebyte.hpp"

namespace longhaul::rng {
namespace {

OneByteScale scale_of(int exponent) {
  Result<OneByteScale> s = OneByteScale::start(exponent);
  EXPECT_TRUE(s.is_ok());
  return *s;
}

std::int8_t encode(float g, const OneByteScale& s) {
  Result<std::int8_t> q = encode_projected_gradient(g, s);
  EXPECT_TRUE(q.is_ok()) << q.status().to_string();
  return q.is_ok() ? *q : std::int8_t{0};
}

TEST(OneByte, RoundTripIsWithinHalfAStepAndDecodesExactly) {
  std::mt19937_64 rng(5);
  for (const int e : {-120, -20, -3, 0, 5, 120}) {
    const OneByteScale s = scale_of(e);
    const double step = std::ldexp(1.0, e);
    std::uniform_real_distribution<double> in_range(-127 * step, 127 * step);
    std::vector<float> g(1000);
    for (float& v : g) v = static_cast<float>(in_range(rng));
    std::vector<std::int8_t> q(g.size());
    std::vector<float> back(g.size());
    ASSERT_TRUE(encode_projected_gradients(g, s, q).is_ok());
    ASSERT_TRUE(decode_projected_gradients(q, s, back).is_ok());
    for (std::size_t i = 0; i < g.size(); ++i) {
      EXPECT_EQ(q[i], encode(g[i], s));
      EXPECT_EQ(static_cast<double>(back[i]), q[i] * step) << "decode rounds at e " << e;
      EXPECT_LE(std::abs(static_cast<double>(back[i]) - g[i]), step / 2) << "e " << e;
    }
  }
}

TEST(OneByte, ClampsToPlusMinus127AndNeverProducesMinus128) {
  const OneByteScale s = scale_of(-4);
  EXPECT_EQ(encode(1000.0f, s), 127);
  EXPECT_EQ(encode(-1000.0f, s), -127);
  EXPECT_EQ(encode(-FLT_MAX, s), -127);
  EXPECT_EQ(encode(FLT_MAX, s), 127);
  EXPECT_EQ(encode(-127.6f / 16, s), -127);
  EXPECT_EQ(encode(1e-45f, s), 0);
}

TEST(OneByte, RoundsHalfToEven) {
  const OneByteScale s = scale_of(0);
  EXPECT_EQ(encode(0.5f, s), 0);
  EXPECT_EQ(encode(1.5f, s), 2);
  EXPECT_EQ(encode(-2.5f, s), -2);
  EXPECT_EQ(encode(126.5f, s), 126);
  EXPECT_EQ(encode(2.5000002f, s), 3);
}

TEST(OneByte, RefusesValuesThatAreNotFinite) {
  const OneByteScale s = scale_of(0);
  EXPECT_EQ(encode_projected_gradient(NAN, s).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(encode_projected_gradient(-INFINITY, s).status().code(), LH_ERR_INVALID_ARGUMENT);
  const std::vector<float> g = {1.0f, 2.0f, INFINITY};
  std::vector<std::int8_t> q(3, 9);
  const Status st = encode_projected_gradients(g, s, q);
  EXPECT_EQ(st.code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("value 2"), std::string::npos) << st.message();
  EXPECT_EQ(q[0], 9) << "nothing written on error";
}

TEST(OneByte, DecodeRefusesMinus128NamingTheContributor) {
  const OneByteScale s = scale_of(0);
  const std::vector<std::int8_t> codes = {1, -127, 127, -128, 5};
  std::vector<float> out(codes.size(), 9.0f);
  const Status st = decode_projected_gradients(codes, s, out);
  EXPECT_EQ(st.code(), LH_ERR_PROTOCOL);
  EXPECT_NE(st.message().find("contributor 3"), std::string::npos) << st.message();
  EXPECT_EQ(out[0], 9.0f) << "nothing written on error";
  std::vector<float> short_out(2);
  EXPECT_EQ(decode_projected_gradients(codes, s, short_out).code(), LH_ERR_INVALID_ARGUMENT);
}

TEST(OneByte, DecodesExactlyAtTheExtremeExponents) {
  const std::vector<std::int8_t> codes = {127, -127, 1, -1, 0, 99};
  std::vector<float> out(codes.size());
  for (const int e : {OneByteScale::kMinExponent, OneByteScale::kMaxExponent}) {
    ASSERT_TRUE(decode_projected_gradients(codes, scale_of(e), out).is_ok());
    for (std::size_t i = 0; i < codes.size(); ++i) {
      EXPECT_TRUE(std::isfinite(out[i]));
      EXPECT_EQ(static_cast<double>(out[i]), std::ldexp(static_cast<double>(codes[i]), e));
    }
  }
}

TEST(OneByte, ScaleRuleDoublesOnAClipHalvesWithHeadroomAndKeepsOtherwise) {
  OneByteScale s = scale_of(0);
  EXPECT_EQ(s.scale(), 1.0f);
  ASSERT_TRUE(s.observe(std::vector<std::int8_t>{3, -127, 0}).is_ok());
  EXPECT_EQ(s.exponent(), 1);
  EXPECT_EQ(s.scale(), 2.0f);
  EXPECT_EQ(s.inverse_scale(), 0.5f);
  ASSERT_TRUE(s.observe(std::vector<std::int8_t>{64, -3}).is_ok());
  EXPECT_EQ(s.exponent(), 1);
  ASSERT_TRUE(s.observe(std::vector<std::int8_t>{}).is_ok());
  EXPECT_EQ(s.exponent(), 1) << "a step without codes keeps the scale";
  ASSERT_TRUE(s.observe(std::vector<std::int8_t>{63, -63, 0}).is_ok());
  EXPECT_EQ(s.exponent(), 0);
  EXPECT_EQ(s.observe(std::vector<std::int8_t>{1, -128}).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.exponent(), 0) << "a refused observation changes nothing";
  OneByteScale top = scale_of(OneByteScale::kMaxExponent);
  ASSERT_TRUE(top.observe(std::vector<std::int8_t>{127}).is_ok());
  EXPECT_EQ(top.exponent(), OneByteScale::kMaxExponent);
  OneByteScale bottom = scale_of(OneByteScale::kMinExponent);
  ASSERT_TRUE(bottom.observe(std::vector<std::int8_t>{0}).is_ok());
  EXPECT_EQ(bottom.exponent(), OneByteScale::kMinExponent);
  EXPECT_FALSE(OneByteScale::start(121).is_ok());
  EXPECT_FALSE(OneByteScale::start(-121).is_ok());
}

// Peers that receive the same codes in different orders agree; on a steady set of projected
// gradients the exponent settles and then stays (no oscillation), with the largest code in
// [64, 127).
TEST(OneByte, ScaleRuleIsOrderFreeAndSettlesOnASteadyDistribution) {
  std::mt19937_64 rng(6);
  std::normal_distribution<float> normal(0.0f, 0.003f);
  std::vector<float> g(16);
  for (float& v : g) v = normal(rng);
  OneByteScale a = scale_of(OneByteScale::kDefaultInitialExponent);
  OneByteScale b = a;
  std::vector<int> history;
  for (int step = 0; step < 40; ++step) {
    std::vector<std::int8_t> q(g.size());
    ASSERT_TRUE(encode_projected_gradients(g, a, q).is_ok());
    ASSERT_TRUE(a.observe(q).is_ok());
    std::shuffle(q.begin(), q.end(), rng);
    ASSERT_TRUE(b.observe(q).is_ok());
    ASSERT_EQ(a.exponent(), b.exponent());
    history.push_back(a.exponent());
  }
  for (std::size_t i = 20; i < history.size(); ++i) EXPECT_EQ(history[i], history.back());
  std::vector<std::int8_t> q(g.size());
  ASSERT_TRUE(encode_projected_gradients(g, a, q).is_ok());
  int largest = 0;
  for (const std::int8_t v : q) largest = std::max(largest, std::abs(int{v}));
  EXPECT_GE(largest, 64);
  EXPECT_LT(largest, 127);
}

}  // namespace
}  // namespace longhaul::rng
