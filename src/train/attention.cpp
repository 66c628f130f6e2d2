#include "train/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "train/blas.hpp"
#include "train/fast_math.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

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

// Rows are processed in blocks of kRowBlock: row block [r0, r0 + rows) attends to columns
// [0, r0 + rows) only, so the GEMMs skip the masked upper triangle above the diagonal blocks
// (about 3/8 of the attention FLOPs at T = 128). Blocks are fixed, so results do not depend on
// the thread count.
constexpr int kRowBlock = 32;

// Each (b, h) is independent and writes its own slices, so heads are spread over the OpenMP
// threads and each head runs its GEMMs and softmax while its T x T block is still in cache.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const HeadSlices s = head_slices(bh, T, C, NH);
    float* a = att + s.att;
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
      const int rows = min_of(kRowBlock, T - r0), cols = r0 + rows;
      float* block = a + static_cast<std::ptrdiff_t>(r0) * T;
      // scores = scale * q k^T, for the block's rows and the columns they may attend to
      sgemm(false, true, rows, cols, hs, scale, qkv + s.q + static_cast<std::ptrdiff_t>(r0) * 3 * C,
            3 * C, qkv + s.k, 3 * C, 0.0f, block, T);
      // causal softmax, row by row; the masked part is set to exactly zero
      for (int t = r0; t < r0 + rows; ++t) {
        float* row = a + static_cast<std::ptrdiff_t>(t) * T;
        const float maxv = lane_max(row, t + 1);
        for (int u = 0; u <= t; ++u) row[u] = exp_approx(row[u] - maxv);
        const float sum = lane_sum(t + 1, [row](int u) { return row[u]; });
        const float inv = 1.0f / sum;
        for (int u = 0; u <= t; ++u) row[u] *= inv;
        for (int u = t + 1; u < T; ++u) row[u] = 0.0f;
      }
      // out = att v
      sgemm(false, false, rows, hs, cols, 1.0f, block, T, qkv + s.v, 3 * C, 0.0f,
            out + s.out + static_cast<std::ptrdiff_t>(r0) * C, C);
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const HeadSlices s = head_slices(bh, T, C, NH);
    const float* a = att + s.att;
    float* d = scratch + s.att;
    // Row blocks: datt = dout v^T, the softmax backward, dq = scale dscores k.
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
      const int rows = min_of(kRowBlock, T - r0), cols = r0 + rows;
      const std::ptrdiff_t row_off = static_cast<std::ptrdiff_t>(r0) * T;
      sgemm(false, true, rows, cols, hs, 1.0f, dout + s.out + static_cast<std::ptrdiff_t>(r0) * C,
            C, qkv + s.v, 3 * C, 0.0f, d + row_off, T);
      // softmax backward in place: dscores = att * (datt - sum(att * datt)), zero above diagonal
      for (int t = r0; t < r0 + rows; ++t) {
        const float* p = a + static_cast<std::ptrdiff_t>(t) * T;
        float* dr = d + static_cast<std::ptrdiff_t>(t) * T;
        const float dot = lane_sum(t + 1, [p, dr](int u) { return p[u] * dr[u]; });
        for (int u = 0; u <= t; ++u) dr[u] = p[u] * (dr[u] - dot);
        for (int u = t + 1; u < T; ++u) dr[u] = 0.0f;
      }
      sgemm(false, false, rows, hs, cols, scale, d + row_off, T, qkv + s.k, 3 * C, 0.0f,
            dqkv + s.q + static_cast<std::ptrdiff_t>(r0) * 3 * C, 3 * C);
    }
    // Column blocks: key/value position c gets gradient from query rows t >= c only:
    // dv = att^T dout, dk = scale dscores^T q.
    for (int c0 = 0; c0 < T; c0 += kRowBlock) {
      const int cs = min_of(kRowBlock, T - c0), rows = T - c0;
      const std::ptrdiff_t corner = static_cast<std::ptrdiff_t>(c0) * T + c0;
      const std::ptrdiff_t tail3 = static_cast<std::ptrdiff_t>(c0) * 3 * C;
      sgemm(true, false, cs, hs, rows, 1.0f, a + corner, T,
            dout + s.out + static_cast<std::ptrdiff_t>(c0) * C, C, 0.0f, dqkv + s.v + tail3, 3 * C);
      sgemm(true, false, cs, hs, rows, scale, d + corner, T, qkv + s.q + tail3, 3 * C, 0.0f,
            dqkv + s.k + tail3, 3 * C);
    }
  }
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
