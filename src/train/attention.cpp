#include "train/attention.hpp"

#include <cmath>
#include <cstddef>

#include "train/blas.hpp"
#include "train/fast_math.hpp"

namespace longhaul::train {

namespace {

struct HeadSlices {
  std::ptrdiff_t q, k, v, out, att;  // offsets of head (b, h) in qkv, qkv, qkv, out and att
};

HeadSlices head_slices(int bh, int T, int C, int NH) {
  const int b = bh / NH, h = bh % NH, hs = C / NH;
  const std::ptrdiff_t qkv_base = static_cast<std::ptrdiff_t>(b) * T * 3 * C + h * hs;
  return {qkv_base, qkv_base + C, qkv_base + 2 * C, static_cast<std::ptrdiff_t>(b) * T * C + h * hs,
          static_cast<std::ptrdiff_t>(bh) * T * T};
}

}  // namespace

// Each (b, h) is independent and writes its own slices, so heads are spread over the OpenMP
// threads and each head runs its GEMMs and softmax while its T x T block is still in cache.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const HeadSlices s = head_slices(bh, T, C, NH);
    float* a = att + s.att;
    // scores = scale * q k^T
    sgemm(false, true, T, T, hs, scale, qkv + s.q, 3 * C, qkv + s.k, 3 * C, 0.0f, a, T);
    // causal softmax, row by row; the masked part is set to exactly zero
    for (int t = 0; t < T; ++t) {
      float* row = a + static_cast<std::ptrdiff_t>(t) * T;
      const float maxv = lane_max(row, t + 1);
      for (int u = 0; u <= t; ++u) row[u] = exp_approx(row[u] - maxv);
      const float sum = lane_sum(t + 1, [row](int u) { return row[u]; });
      const float inv = 1.0f / sum;
      for (int u = 0; u <= t; ++u) row[u] *= inv;
      for (int u = t + 1; u < T; ++u) row[u] = 0.0f;
    }
    // out = att v
    sgemm(false, false, T, hs, T, 1.0f, a, T, qkv + s.v, 3 * C, 0.0f, out + s.out, C);
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const HeadSlices s = head_slices(bh, T, C, NH);
    const float* a = att + s.att;
    float* d = scratch + s.att;
    // datt = dout v^T; dv = att^T dout
    sgemm(false, true, T, T, hs, 1.0f, dout + s.out, C, qkv + s.v, 3 * C, 0.0f, d, T);
    sgemm(true, false, T, hs, T, 1.0f, a, T, dout + s.out, C, 0.0f, dqkv + s.v, 3 * C);
    // softmax backward in place: dscores = att * (datt - sum(att * datt)), zero above diagonal
    for (int t = 0; t < T; ++t) {
      const float* p = a + static_cast<std::ptrdiff_t>(t) * T;
      float* dr = d + static_cast<std::ptrdiff_t>(t) * T;
      const float dot = lane_sum(t + 1, [p, dr](int u) { return p[u] * dr[u]; });
      for (int u = 0; u <= t; ++u) dr[u] = p[u] * (dr[u] - dot);
      for (int u = t + 1; u < T; ++u) dr[u] = 0.0f;
    }
    // dq = scale dscores k; dk = scale dscores^T q
    sgemm(false, false, T, hs, T, scale, d, T, qkv + s.k, 3 * C, 0.0f, dqkv + s.q, 3 * C);
    sgemm(true, false, T, hs, T, scale, d, T, qkv + s.q, 3 * C, 0.0f, dqkv + s.k, 3 * C);
  }
}

}  // namespace longhaul::train
