// Every layer kind's backward against central finite differences (see gradcheck.hpp). Sizes are
// small and odd on purpose, so no kernel can lean on a multiple of a vector width.
#include <gtest/gtest.h>

#include <vector>

#include "gradcheck.hpp"
#include "train/attention.hpp"
#include "train/embedding.hpp"
#include "train/gelu.hpp"
#include "train/layernorm.hpp"
#include "train/linear.hpp"
#include "train/softmax_cross_entropy.hpp"

namespace longhaul::train {
namespace {

using testing::expect_gradient;
using testing::random_vector;
using testing::Tolerance;
using testing::weighted_sum;

TEST(trainKernels, LayerNormBackwardMatchesFiniteDifferences) {
  const int N = 5, C = 19;
  std::vector<float> x = random_vector(N * C, 1, 1.5, 0.3);
  std::vector<float> w = random_vector(C, 2, 0.5, 1.0);
  std::vector<float> b = random_vector(C, 3, 0.5);
  const std::vector<float> probe = random_vector(N * C, 4);
  std::vector<float> out(N * C), mean(N), rstd(N);
  const auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return weighted_sum(out, probe);
  };
  loss();
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  layernorm_backward(dx.data(), dw.data(), db.data(), probe.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  const Tolerance tol{1e-2, 2e-3, 1e-2};
  expect_gradient("dinp", x, dx, loss, tol);
  expect_gradient("dweight", w, dw, loss, tol);
  expect_gradient("dbias", b, db, loss, tol);
}

TEST(trainKernels, LayerNormBackwardAccumulates) {
  const int N = 3, C = 8;
  const std::vector<float> x = random_vector(N * C, 5), w = random_vector(C, 6, 0.1, 1.0);
  const std::vector<float> b(C, 0.0f), dout = random_vector(N * C, 7);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  std::vector<float> dx2(N * C, 1.0f), dw2(C, 1.0f), db2(C, 1.0f);
  layernorm_backward(dx2.data(), dw2.data(), db2.data(), dout.data(), x.data(), w.data(),
                     mean.data(), rstd.data(), N, C);
  for (int i = 0; i < N * C; ++i) EXPECT_FLOAT_EQ(dx2[i], dx[i] + 1.0f);
  for (int c = 0; c < C; ++c) EXPECT_FLOAT_EQ(db2[c], db[c] + 1.0f);
}

TEST(trainKernels, LinearBackwardMatchesFiniteDifferences) {
  const int N = 7, C = 11, OC = 13;
  std::vector<float> x = random_vector(N * C, 8), w = random_vector(OC * C, 9, 0.3);
  std::vector<float> b = random_vector(OC, 10);
  const std::vector<float> probe = random_vector(N * OC, 11);
  std::vector<float> out(N * OC);
  const auto loss = [&] {
    linear_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC);
    return weighted_sum(out, probe);
  };
  std::vector<float> dx(N * C, 0.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  linear_backward(dx.data(), dw.data(), db.data(), probe.data(), x.data(), w.data(), N, C, OC);
  const Tolerance tol{1e-2, 1e-3, 1e-3};
  expect_gradient("dinp", x, dx, loss, tol);
  expect_gradient("dweight", w, dw, loss, tol);
  expect_gradient("dbias", b, db, loss, tol);
}

TEST(trainKernels, LinearWithoutBiasMatchesPlainProduct) {
  const int N = 3, C = 4, OC = 2;
  const std::vector<float> x = random_vector(N * C, 12), w = random_vector(OC * C, 13);
  std::vector<float> out(N * OC);
  linear_forward(out.data(), x.data(), w.data(), nullptr, N, C, OC);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double ref = 0.0;
      for (int c = 0; c < C; ++c) ref += static_cast<double>(x[n * C + c]) * w[o * C + c];
      EXPECT_NEAR(out[n * OC + o], ref, 1e-5);
    }
  }
}

TEST(trainKernels, AttentionBackwardMatchesFiniteDifferences) {
  const int B = 2, T = 5, C = 12, NH = 3;
  std::vector<float> qkv = random_vector(B * T * 3 * C, 14);
  const std::vector<float> probe = random_vector(B * T * C, 15);
  std::vector<float> out(B * T * C), att(B * NH * T * T), scratch(B * NH * T * T);
  const auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return weighted_sum(out, probe);
  };
  loss();
  std::vector<float> dqkv(qkv.size(), 0.0f);
  attention_backward(dqkv.data(), scratch.data(), probe.data(), qkv.data(), att.data(), B, T, C,
                     NH);
  expect_gradient("dqkv", qkv, dqkv, loss, Tolerance{1e-2, 2e-3, 1e-2});
}

TEST(trainKernels, AttentionIsCausal) {
  // Changing the last position's q, k, v must leave every earlier output untouched.
  const int B = 1, T = 6, C = 8, NH = 2;
  std::vector<float> qkv = random_vector(B * T * 3 * C, 16);
  std::vector<float> out1(B * T * C), out2(B * T * C), att(B * NH * T * T);
  attention_forward(out1.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int c = 0; c < 3 * C; ++c) qkv[(T - 1) * 3 * C + c] += 1.0f;
  attention_forward(out2.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int i = 0; i < (T - 1) * C; ++i) EXPECT_EQ(out1[i], out2[i]) << i;
  for (int h = 0; h < NH; ++h) {
    for (int t = 0; t < T; ++t) {
      float sum = 0.0f;
      for (int s = 0; s < T; ++s) {
        const float p = att[(h * T + t) * T + s];
        if (s > t) {
          EXPECT_EQ(p, 0.0f);
        }
        sum += p;
      }
      EXPECT_NEAR(sum, 1.0f, 1e-6);
    }
  }
}

TEST(trainKernels, GeluBackwardMatchesFiniteDifferences) {
  const int N = 41;
  std::vector<float> x = random_vector(N, 17, 2.0);
  x[0] = 0.0f;
  x[1] = -8.0f;
  x[2] = 9.0f;
  const std::vector<float> probe = random_vector(N, 18);
  std::vector<float> out(N);
  const auto loss = [&] {
    gelu_forward(out.data(), x.data(), N);
    return weighted_sum(out, probe);
  };
  std::vector<float> dx(N, 0.0f);
  gelu_backward(dx.data(), x.data(), probe.data(), N);
  expect_gradient("dinp", x, dx, loss, Tolerance{1e-2, 1e-3, 1e-2});
}

TEST(trainKernels, GeluMatchesTheTanhFormula) {
  for (float x : {-6.0f, -2.5f, -1.0f, -0.1f, 0.0f, 0.3f, 1.0f, 2.0f, 7.0f}) {
    float y = 0.0f;
    gelu_forward(&y, &x, 1);
    const double xd = x;
    const double ref =
        0.5 * xd * (1.0 + std::tanh(0.7978845608028654 * (xd + 0.044715 * xd * xd * xd)));
    EXPECT_NEAR(y, ref, 1e-6 + 1e-6 * std::fabs(ref)) << x;
  }
}

TEST(trainKernels, EmbeddingBackwardMatchesFiniteDifferences) {
  const int B = 2, T = 4, C = 5, V = 7;
  const std::vector<int> tokens = {3, 1, 3, 6, 0, 3, 1, 2};  // repeats on purpose
  std::vector<float> wte = random_vector(V * C, 19), wpe = random_vector(T * C, 20);
  const std::vector<float> probe = random_vector(B * T * C, 21);
  std::vector<float> out(B * T * C);
  const auto loss = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return weighted_sum(out, probe);
  };
  std::vector<float> dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
  embedding_backward(dwte.data(), dwpe.data(), probe.data(), tokens.data(), B, T, C);
  const Tolerance tol{1e-2, 1e-4, 1e-3};
  expect_gradient("dwte", wte, dwte, loss, tol);
  expect_gradient("dwpe", wpe, dwpe, loss, tol);
}

TEST(trainKernels, SoftmaxCrossEntropyBackwardMatchesFiniteDifferences) {
  const int N = 6, V = 11;
  std::vector<float> logits = random_vector(N * V, 22, 2.0);
  const std::vector<int> targets = {0, 10, 5, 5, 3, 7};
  std::vector<float> probs(N * V), losses(N);
  const auto loss = [&] {
    softmax_cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V);
    double sum = 0.0;
    for (float l : losses) sum += l;
    return sum / N;
  };
  loss();
  std::vector<float> dlogits(N * V);
  softmax_cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), N, V);
  expect_gradient("dlogits", logits, dlogits, loss, Tolerance{1e-2, 1e-4, 1e-2});
}

TEST(trainKernels, CrossEntropyOfUniformLogitsIsLogV) {
  const int N = 3, V = 256;
  const std::vector<float> logits(N * V, 0.25f);
  const std::vector<int> targets = {0, 17, 255};
  std::vector<float> probs(N * V), losses(N);
  const float mean = softmax_cross_entropy_forward(probs.data(), losses.data(), logits.data(),
                                                   targets.data(), N, V);
  EXPECT_NEAR(mean, std::log(256.0), 1e-5);
}

}  // namespace
}  // namespace longhaul::train
