// AdamW against a double-precision transcription of its formula, the learning-rate schedule and
// global-norm clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "train/adamw.hpp"
#include "train/grad_clip.hpp"
#include "train/lr_schedule.hpp"
#include "train/param_layout.hpp"

namespace longhaul::train {
namespace {

using testing::random_vector;

TEST(trainAdamW, MatchesTheFormulaWithDecayOnMatricesOnly) {
  const GptConfig config{16, 4, 1, 8, 2};
  const std::size_t n = parameter_count(config);
  AdamWOptions o;
  o.weight_decay = 0.5;  // large, so a missing or misplaced decay shows
  AdamW adamw(config, o);
  std::vector<float> p = random_vector(n, 1, 0.1);
  std::vector<double> ref_p(p.begin(), p.end()), ref_m(n, 0.0), ref_v(n, 0.0);
  std::vector<bool> decays(n, false);
  for (const TensorSpec& s : parameter_layout(config)) {
    for (std::size_t i = 0; i < s.size; ++i) decays[s.offset + i] = s.decay;
  }
  const float lrs[] = {1e-2f, 5e-3f, 2e-3f, 1e-3f};
  for (int t = 1; t <= 4; ++t) {
    const std::vector<float> g = random_vector(n, 100 + static_cast<std::uint64_t>(t), 0.01);
    const double lr = lrs[t - 1];
    adamw.step(p, g, lrs[t - 1]);
    for (std::size_t i = 0; i < n; ++i) {
      if (decays[i]) ref_p[i] *= 1.0 - lr * o.weight_decay;
      ref_m[i] = o.beta1 * ref_m[i] + (1.0 - o.beta1) * g[i];
      ref_v[i] = o.beta2 * ref_v[i] + (1.0 - o.beta2) * g[i] * g[i];
      const double mhat = ref_m[i] / (1.0 - std::pow(o.beta1, t));
      const double vhat = ref_v[i] / (1.0 - std::pow(o.beta2, t));
      ref_p[i] -= lr * mhat / (std::sqrt(vhat) + o.eps);
    }
  }
  EXPECT_EQ(adamw.steps_taken(), 4);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(p[i], ref_p[i], 1e-6) << i;
    ASSERT_NEAR(adamw.m()[i], ref_m[i], 1e-8) << i;
  }
}

TEST(trainLrSchedule, WarmsUpLinearlyThenFollowsACosineToTheFloor) {
  const LrSchedule s{1e-3f, 1e-4f, 10, 110};
  EXPECT_FLOAT_EQ(s.at(0), 1e-4f);
  EXPECT_FLOAT_EQ(s.at(4), 5e-4f);
  EXPECT_FLOAT_EQ(s.at(9), 1e-3f);
  EXPECT_FLOAT_EQ(s.at(10), 1e-3f);
  EXPECT_NEAR(s.at(60), 0.5 * (1e-3 + 1e-4), 1e-9);  // halfway through the cosine
  EXPECT_NEAR(s.at(109), 1e-4 + 9e-4 * 0.5 * (1.0 + std::cos(M_PI * 0.99)), 1e-9);
  EXPECT_FLOAT_EQ(s.at(110), 1e-4f);
  EXPECT_FLOAT_EQ(s.at(5000), 1e-4f);
  for (int i = 10; i < 110; ++i) EXPECT_LE(s.at(i + 1), s.at(i)) << i;
}

TEST(trainGradClip, ScalesToTheMaxNormOnlyWhenAbove) {
  std::vector<float> g = random_vector(100'003, 3);  // several chunks and a ragged end
  double ref = 0.0;
  for (float x : g) ref += static_cast<double>(x) * x;
  ref = std::sqrt(ref);
  EXPECT_NEAR(global_norm(g), ref, 1e-9 * ref);

  std::vector<float> unchanged = g;
  EXPECT_NEAR(clip_grad_norm(unchanged, ref * 2), ref, 1e-9 * ref);
  EXPECT_EQ(unchanged, g);

  EXPECT_NEAR(clip_grad_norm(g, 1.0), ref, 1e-9 * ref);
  EXPECT_NEAR(global_norm(g), 1.0, 1e-5);
}

}  // namespace
}  // namespace longhaul::train
