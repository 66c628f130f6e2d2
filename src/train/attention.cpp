#include "train/attention.hpp"

#include <cblas.h>

#include <cmath>
#include <cstddef>

#include "train/fast_math.hpp"

namespace longhaul::train {

namespace {

struct HeadSlices {
  std::ptrdiff_t q, k, v, out, att;  // offsets of head (b, h) in qkv, qkv, qkv, out and att
};

HeadSlices head_slices(int b, int h, int T, int C, int NH) {
  const int hs = C / NH;
  const std::ptrdiff_t qkv_base = static_cast<std::ptrdiff_t>(b) * T * 3 * C + h * hs;
  return {qkv_base, qkv_base + C, qkv_base + 2 * C, static_cast<std::ptrdiff_t>(b) * T * C + h * hs,
          (static_cast<std::ptrdiff_t>(b) * NH + h) * T * T};
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // scores = scale * q k^T for every head
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const HeadSlices s = head_slices(b, h, T, C, NH);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, qkv + s.q, 3 * C,
                  qkv + s.k, 3 * C, 0.0f, att + s.att, T);
    }
  }
  // causal softmax, row by row; the masked part is set to exactly zero
  const long rows = static_cast<long>(B) * NH * T;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    float* row = att + r * T;
    float maxv = row[0];
    for (int s = 1; s <= t; ++s) maxv = row[s] > maxv ? row[s] : maxv;
    float sum = 0.0f;
    for (int s = 0; s <= t; ++s) {
      row[s] = exp_approx(row[s] - maxv);
      sum += row[s];
    }
    const float inv = 1.0f / sum;
    for (int s = 0; s <= t; ++s) row[s] *= inv;
    for (int s = t + 1; s < T; ++s) row[s] = 0.0f;
  }
  // out = att v
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const HeadSlices s = head_slices(b, h, T, C, NH);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, att + s.att, T,
                  qkv + s.v, 3 * C, 0.0f, out + s.out, C);
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // datt = dout v^T (into scratch); dv += att^T dout
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const HeadSlices s = head_slices(b, h, T, C, NH);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dout + s.out, C,
                  qkv + s.v, 3 * C, 0.0f, scratch + s.att, T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, att + s.att, T,
                  dout + s.out, C, 1.0f, dqkv + s.v, 3 * C);
    }
  }
  // softmax backward in place: dscores = att * (datt - sum(att * datt)), zero above the diagonal
  const long rows = static_cast<long>(B) * NH * T;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    const float* p = att + r * T;
    float* d = scratch + r * T;
    float dot = 0.0f;
    for (int s = 0; s <= t; ++s) dot += p[s] * d[s];
    for (int s = 0; s <= t; ++s) d[s] = p[s] * (d[s] - dot);
    for (int s = t + 1; s < T; ++s) d[s] = 0.0f;
  }
  // dq += scale dscores k; dk += scale dscores^T q
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const HeadSlices s = head_slices(b, h, T, C, NH);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, scratch + s.att, T,
                  qkv + s.k, 3 * C, 1.0f, dqkv + s.q, 3 * C);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, scratch + s.att, T,
                  qkv + s.q, 3 * C, 1.0f, dqkv + s.k, 3 * C);
    }
  }
}

}  // namespace longhaul::train
