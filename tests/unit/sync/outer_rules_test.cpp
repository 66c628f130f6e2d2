// Each outer rule against a scalar reference written from its equation (docs/training.md),
// independently of the engine's code: the same f32 operations in the same order, so bit for bit.
#include "sync/outer_rules.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace longhaul::sync {
namespace {

std::vector<float> random(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(OuterRules, NesterovIsPyTorchsSgdWithNesterovMomentum) {
  // The hand-computed example of docs/training.md: θ0 = 1, μ = 0.9, lr = 0.7, g = 0.1 then 0.2.
  std::vector<float> theta{1.0f}, b{0.0f};
  const NesterovParams p{0.7f, 0.9f};
  nesterov_step(theta, b, std::vector<float>{0.1f}, p, /*first=*/true);
  EXPECT_NEAR(theta[0], 0.867f, 1e-6);
  nesterov_step(theta, b, std::vector<float>{0.2f}, p, /*first=*/false);
  EXPECT_NEAR(theta[0], 0.5443f, 1e-6);
  EXPECT_NEAR(b[0], 0.29f, 1e-6);

  // And bit for bit on random data over five rounds, against the equation written out.
  auto engine_theta = random(1000, 1, 1.0f), engine_b = std::vector<float>(1000, 0.0f);
  auto ref_theta = engine_theta, ref_b = engine_b;
  for (int round = 0; round < 5; ++round) {
    const auto g = random(1000, 10 + round, 0.01f);
    nesterov_step(engine_theta, engine_b, g, p, round == 0);
    for (size_t i = 0; i < g.size(); ++i) {
      ref_b[i] = round == 0 ? g[i] : p.momentum * ref_b[i] + g[i];  // b ← μ·b + g (first: g)
      const float u = g[i] + p.momentum * ref_b[i];                 // u ← g + μ·b
      ref_theta[i] = ref_theta[i] - p.lr * u;                       // θ ← θ − lr·u
    }
    ASSERT_TRUE(same_bits(engine_theta, ref_theta)) << "round " << round;
    ASSERT_TRUE(same_bits(engine_b, ref_b)) << "round " << round;
  }
}

TEST(OuterRules, NesterovsFirstRoundKeepsTheBitsOfANegativeZeroGradient) {
  std::vector<float> theta{2.0f}, b{5.0f};
  nesterov_step(theta, b, std::vector<float>{-0.0f}, {0.7f, 0.9f}, true);
  EXPECT_TRUE(std::signbit(b[0]));
}

TEST(OuterRules, Co2IsHeavyBallWithTheGapPenaltyAndElementwiseClipping) {
  const Co2Params p{1.0f, 0.2f, 2.0f, 0.05f};
  auto engine_theta = random(1000, 2, 1.0f), engine_m = std::vector<float>(1000, 0.0f);
  auto ref_theta = engine_theta, ref_m = engine_m;
  int clipped = 0;
  for (int round = 0; round < 5; ++round) {
    const auto g = random(1000, 20 + round, 0.05f);
    co2_step(engine_theta, engine_m, g, p);
    for (size_t i = 0; i < g.size(); ++i) {
      float m = p.momentum * ref_m[i] + g[i] / p.gap_penalty;  // m ← β·m + g/λ
      if (m > p.clip) m = p.clip, ++clipped;                   // clip to [−φ, φ]
      if (m < -p.clip) m = -p.clip, ++clipped;
      ref_m[i] = m;
      ref_theta[i] = ref_theta[i] - p.lr * m;  // θ ← θ − α·m
    }
    ASSERT_TRUE(same_bits(engine_theta, ref_theta)) << "round " << round;
    ASSERT_TRUE(same_bits(engine_m, ref_m)) << "round " << round;
  }
  EXPECT_GT(clipped, 0) << "the data never reached the clip: the test would not see it";
  Co2Params unclipped = p;
  unclipped.clip = 0.0f;
  std::vector<float> theta{0.0f}, m{0.0f};
  co2_step(theta, m, std::vector<float>{10.0f}, unclipped);
  EXPECT_EQ(m[0], 5.0f);  // no clip: 0.2·0 + 10/2
}

TEST(OuterRules, EagerRestartElementIsItsEquationBitForBit) {
  const NesterovParams p{0.7f, 0.9f};
  const auto theta = random(1000, 3, 1.0f), buffer = random(1000, 4, 0.01f),
             fresh = random(1000, 5, 0.01f);
  for (size_t i = 0; i < fresh.size(); ++i) {
    for (const bool first : {false, true}) {
      const float b = first ? fresh[i] : p.momentum * buffer[i] + fresh[i];  // b' (tentative)
      const float r = theta[i] - p.lr * (fresh[i] + p.momentum * b);  // θ − lr·(g + μ·b')
      const float got = eager_restart_element(theta[i], buffer[i], fresh[i], p, first);
      ASSERT_EQ(std::memcmp(&got, &r, 4), 0) << i << (first ? " first" : "");
    }
  }
  // Worked example: θ = 1, b = 0.1, g = 0.2, μ = 0.9, lr = 0.7: b' = 0.29, r = 1 − 0.7·0.461.
  EXPECT_FLOAT_EQ(eager_restart_element(1.0f, 0.1f, 0.2f, p, false), 0.6773f);
}

// What the rule is for: the mean of the peers' restart points is the θ_g the round's mean gives
// one round later (Nesterov is linear in g), so the shared state is DiLoCo's, however the peers'
// pseudo-gradients differ; up to f32 rounding of the two orders of summation.
TEST(OuterRules, EagerRestartPointsAverageToTheNextThetaG) {
  const NesterovParams p{0.7f, 0.9f};
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  std::vector<float> theta{1.0f}, buffer{0.0f};
  for (int k = 1; k <= 40; ++k) {
    float fresh[4], mean = 0.0f, restart_mean = 0.0f;
    for (float& g : fresh) mean += (g = 0.1f + noise(rng));
    mean /= 4.0f;
    for (const float g : fresh)
      restart_mean += eager_restart_element(theta[0], buffer[0], g, p, k == 1);
    restart_mean /= 4.0f;
    nesterov_step(theta, buffer, std::vector<float>{mean}, p, /*first=*/k == 1);
    ASSERT_NEAR(restart_mean, theta[0], 1e-5f * (1.0f + std::fabs(theta[0]))) << k;
  }
}

TEST(OuterRules, MixIsTheMergeAndAlphaZeroCopiesBitForBit) {
  EXPECT_EQ(mix(std::nanf(""), 3.0f, 0.0f), 3.0f);  // nothing of the local value leaks through
  EXPECT_EQ(mix(1.0f, 3.0f, 0.5f), 2.0f);
  EXPECT_EQ(mix(1.0f, 3.0f, 0.25f), 0.25f * 1.0f + 0.75f * 3.0f);
}

}  // namespace
}  // namespace longhaul::sync
