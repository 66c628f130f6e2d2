#include "train/layernorm.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "train/fast_math.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

namespace {
constexpr float kEps = 1e-5f;
// dweight/dbias are reduced over rows; splitting by column blocks (not rows) keeps each sum in
// one fixed order whatever the thread count, so results are bit-reproducible.
constexpr int kColumnBlock = 16;
}  // namespace

namespace {
void normalize_row(float* y, float* mean, float* rstd, const float* x, const float* weight,
                   const float* bias, int C) {
  const float m = lane_sum(C, [x](int c) { return x[c]; }) / static_cast<float>(C);
  const float var = lane_sum(C, [x, m](int c) { return (x[c] - m) * (x[c] - m); });
  const float s = 1.0f / __builtin_sqrtf(var / static_cast<float>(C) + kEps);
  for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
  *mean = m;
  *rstd = s;
}
}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(n) * C;
    normalize_row(out + row, mean + n, rstd + n, inp + row, weight, bias, C);
  }
}

void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd,
                                const float* a, const float* b, const float* weight,
                                const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(n) * C;
    for (int c = 0; c < C; ++c) residual[row + c] = a[row + c] + b[row + c];
    normalize_row(out + row, mean + n, rstd + n, residual + row, weight, bias, C);
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
  const int blocks = (C + kColumnBlock - 1) / kColumnBlock;
  // One parallel region, two independent loops (rows for dinp, columns for the parameters).
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int n = 0; n < N; ++n) {
      const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(n) * C;
      const float* dy = dout + row;
      const float* x = inp + row;
      float* dx = dinp + row;
      const float m = mean[n], s = rstd[n];
      // dnorm = dy * w; dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
      float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = weight[c] * dy[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
      }
      dnorm_mean /= static_cast<float>(C);
      dnorm_norm_mean /= static_cast<float>(C);
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = weight[c] * dy[c];
        dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
      }
    }
#pragma omp for schedule(static)
    for (int blk = 0; blk < blocks; ++blk) {
      const int c0 = blk * kColumnBlock, c1 = min_of(C, c0 + kColumnBlock);
      float dw[kColumnBlock] = {}, db[kColumnBlock] = {};
      for (int n = 0; n < N; ++n) {
        const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(n) * C;
        const float m = mean[n], s = rstd[n];
        for (int c = c0; c < c1; ++c) {
          const float norm = (inp[row + c] - m) * s;
          dw[c - c0] += norm * dout[row + c];
          db[c - c0] += dout[row + c];
        }
      }
      for (int c = c0; c < c1; ++c) {
        dweight[c] += dw[c - c0];
        dbias[c] += db[c - c0];
      }
    }
  }
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
