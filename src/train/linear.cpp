#include "train/linear.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstddef>

namespace longhaul::train {

namespace {
// The bias gradient is a sum over rows; blocks of columns keep each sum in a fixed order.
constexpr int kColumnBlock = 64;
}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  float beta = 0.0f;
  if (bias != nullptr) {
    // Seeding the output with the bias lets the GEMM add to it (beta = 1): one pass, not two.
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n)
      std::copy(bias, bias + OC, out + static_cast<std::ptrdiff_t>(n) * OC);
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta, out,
              OC);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f,
              dinp, C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  if (dbias == nullptr) return;
  const int blocks = (OC + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    const int o0 = blk * kColumnBlock, o1 = std::min(OC, o0 + kColumnBlock);
    float acc[kColumnBlock] = {};
    for (int n = 0; n < N; ++n) {
      const float* row = dout + static_cast<std::ptrdiff_t>(n) * OC;
      for (int o = o0; o < o1; ++o) acc[o - o0] += row[o];
    }
    for (int o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
  }
}

}  // namespace longhaul::train
