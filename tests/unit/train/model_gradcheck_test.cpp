// The whole GPT's backward against finite differences of its loss, tensor by tensor, plus the
// properties the outer loops rely on: bit-identical results whatever the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "train/gpt.hpp"
#include "train/init.hpp"
#include "train/param_layout.hpp"
#include "train/threads.hpp"

namespace longhaul::train {
namespace {

using testing::random_vector;

GptConfig tiny_config() {
  return GptConfig{29, 8, 2, 12, 3};
}

struct TinyBatch {
  int B = 2, T = 7;
  std::vector<int> inputs, targets;
};

TinyBatch tiny_batch(int vocab) {
  TinyBatch b;
  Rng rng(99);
  for (int i = 0; i < b.B * b.T; ++i) {
    b.inputs.push_back(static_cast<int>(rng.below(static_cast<std::uint64_t>(vocab))));
    b.targets.push_back(static_cast<int>(rng.below(static_cast<std::uint64_t>(vocab))));
  }
  return b;
}

// Parameters far from the usual N(0, 0.02) so that every nonlinearity is exercised.
void randomize(Gpt& model) {
  const std::vector<float> r = random_vector(model.params().size(), 7, 0.3);
  std::copy(r.begin(), r.end(), model.params().begin());
  const ParamViews p = model.param_views();
  const GptConfig& c = model.config();
  for (int i = 0; i < c.layers * c.channels; ++i) {
    p.ln1_w[i] += 1.0f;
    p.ln2_w[i] += 1.0f;
  }
  for (int i = 0; i < c.channels; ++i) p.lnf_w[i] += 1.0f;
}

double loss_of(Gpt& model, const TinyBatch& b) {
  Result<float> loss = model.forward(b.inputs.data(), b.targets.data(), b.B, b.T);
  EXPECT_TRUE(loss.is_ok()) << loss.status().to_string();
  return loss.is_ok() ? static_cast<double>(*loss) : 0.0;
}

TEST(trainModel, EveryParameterGradientMatchesFiniteDifferences) {
  Result<Gpt> made = Gpt::create(tiny_config());
  ASSERT_TRUE(made.is_ok());
  Gpt& model = *made;
  randomize(model);
  const TinyBatch batch = tiny_batch(model.config().vocab);
  loss_of(model, batch);
  model.zero_grad();
  ASSERT_TRUE(model.backward().is_ok());
  const std::vector<float> grads(model.grads().begin(), model.grads().end());

  for (const TensorSpec& spec : parameter_layout(model.config())) {
    // Directional derivative along a random direction of this tensor: one number that every
    // element of the gradient contributes to.
    const std::vector<float> dir = random_vector(spec.size, spec.offset + 1);
    double analytic = 0.0;
    for (std::size_t i = 0; i < spec.size; ++i) analytic += grads[spec.offset + i] * dir[i];
    const double eps = 1e-3;
    std::vector<float> saved(
        model.params().begin() + static_cast<std::ptrdiff_t>(spec.offset),
        model.params().begin() + static_cast<std::ptrdiff_t>(spec.offset + spec.size));
    const auto shifted_loss = [&](double sign) {
      for (std::size_t i = 0; i < spec.size; ++i) {
        model.params()[spec.offset + i] = static_cast<float>(saved[i] + sign * eps * dir[i]);
      }
      return loss_of(model, batch);
    };
    const double numeric = (shifted_loss(1.0) - shifted_loss(-1.0)) / (2.0 * eps);
    std::copy(saved.begin(), saved.end(),
              model.params().begin() + static_cast<std::ptrdiff_t>(spec.offset));
    EXPECT_NEAR(analytic, numeric, 2e-4 + 2e-2 * std::fabs(numeric)) << spec.name;
    EXPECT_GT(std::fabs(analytic), 1e-4) << spec.name << ": gradient too small to check";
  }
}

TEST(trainModel, ResultsDoNotDependOnTheThreadCount) {
  GptConfig config{256, 16, 2, 32, 4};
  std::vector<float> grads[2];
  float losses[2] = {};
  const int threads[2] = {1, 2};
  for (int run = 0; run < 2; ++run) {
    set_thread_count(threads[run]);
    Result<Gpt> made = Gpt::create(config);
    ASSERT_TRUE(made.is_ok());
    init_parameters(made->params().data(), config, 5);
    TinyBatch b;
    b.B = 20;  // 320 rows: more than one GEMM row tile
    b.T = 16;
    Rng rng(3);
    for (int i = 0; i < b.B * b.T; ++i) {
      b.inputs.push_back(static_cast<int>(rng.below(256)));
      b.targets.push_back(static_cast<int>(rng.below(256)));
    }
    losses[run] = static_cast<float>(loss_of(*made, b));
    made->zero_grad();
    ASSERT_TRUE(made->backward().is_ok());
    grads[run].assign(made->grads().begin(), made->grads().end());
  }
  set_thread_count(0);
  EXPECT_EQ(losses[0], losses[1]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < grads[0].size(); ++i) differing += grads[0][i] != grads[1][i];
  EXPECT_EQ(differing, 0u);
}

TEST(trainModel, ForwardRejectsBadShapesAndTokens) {
  Result<Gpt> made = Gpt::create(tiny_config());
  ASSERT_TRUE(made.is_ok());
  std::vector<int> tokens(20, 1);
  EXPECT_FALSE(made->forward(tokens.data(), tokens.data(), 1, 9).is_ok());  // T > context
  tokens[3] = 29;                                                           // == vocab
  EXPECT_FALSE(made->forward(tokens.data(), nullptr, 2, 4).is_ok());
  EXPECT_FALSE(made->backward().is_ok());                          // no forward with targets yet
  EXPECT_FALSE(Gpt::create(GptConfig{256, 8, 1, 10, 3}).is_ok());  // 10 % 3 != 0
}

TEST(trainModel, DefaultConfigHasAboutAMillionParameters) {
  const std::size_t n = parameter_count(GptConfig{});
  EXPECT_GT(n, 900'000u);
  EXPECT_LT(n, 1'200'000u);
}

}  // namespace
}  // namespace longhaul::train
