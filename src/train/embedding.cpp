#include "train/embedding.hpp"

#include <algorithm>
#include <cstddef>

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

namespace {
constexpr int kColumnBlock = 16;
}

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; ++bt) {
    const int t = bt % T;
    const float* tok_row = wte + static_cast<std::ptrdiff_t>(tokens[bt]) * C;
    const float* pos_row = wpe + static_cast<std::ptrdiff_t>(t) * C;
    float* o = out + static_cast<std::ptrdiff_t>(bt) * C;
    for (int c = 0; c < C; ++c) o[c] = tok_row[c] + pos_row[c];
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C) {
  // Position rows: one thread owns row t and adds the B contributions in order.
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T; ++t) {
    float* d = dwpe + static_cast<std::ptrdiff_t>(t) * C;
    for (int b = 0; b < B; ++b) {
      const float* g = dout + (static_cast<std::ptrdiff_t>(b) * T + t) * C;
      for (int c = 0; c < C; ++c) d[c] += g[c];
    }
  }
  // Token rows are scattered (a byte repeats), so split by columns instead of rows.
  const int blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kColumnBlock, c1 = min_of(C, c0 + kColumnBlock);
    for (int bt = 0; bt < B * T; ++bt) {
      float* d = dwte + static_cast<std::ptrdiff_t>(tokens[bt]) * C;
      const float* g = dout + static_cast<std::ptrdiff_t>(bt) * C;
      for (int c = c0; c < c1; ++c) d[c] += g[c];
    }
  }
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
