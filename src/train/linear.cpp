#include "train/linear.hpp"

#include <cstring>

#include <algorithm>
#include <cstddef>

#include "train/blas.hpp"
#include "train/gelu.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

namespace {
// Work is cut into fixed tiles, each one single-threaded GEMM, and the tiles are spread over the
// OpenMP threads. The tiles do not depend on the thread count, so neither do the results.
constexpr int kRowTile = 256;  // rows of inp / dinp / out per GEMM
constexpr int kOutTile = 128;  // rows of dweight (output features) per GEMM
constexpr int kInTile = 128;   // columns of dweight (input features) per GEMM
constexpr int kBiasBlock = 64;

int tiles(int n, int tile) {
  return (n + tile - 1) / tile;
}
}  // namespace

namespace {
void forward_tiles(float* out, float* out_gelu, const float* inp, const float* weight,
                   const float* bias, int N, int C, int OC) {
  const int row_tiles = tiles(N, kRowTile);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < row_tiles; ++t) {
    const int n0 = t * kRowTile, rows = min_of(kRowTile, N - n0);
    float* o = out + static_cast<std::ptrdiff_t>(n0) * OC;
    float beta = 0.0f;
    if (bias != nullptr) {
      // Seeding the output with the bias lets the GEMM add to it (beta = 1): one pass, not two.
      for (int r = 0; r < rows; ++r)
        std::memcpy(o + static_cast<std::ptrdiff_t>(r) * OC, bias, sizeof(float) * OC);
      beta = 1.0f;
    }
    sgemm(false, true, rows, OC, C, 1.0f, inp + static_cast<std::ptrdiff_t>(n0) * C, C, weight, C,
          beta, o, OC);
    if (out_gelu != nullptr) {
      const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(n0) * OC;
      gelu_forward_serial(out_gelu + at, o, static_cast<long>(rows) * OC);
    }
  }
}
}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  forward_tiles(out, nullptr, inp, weight, bias, N, C, OC);
}

void linear_gelu_forward(float* out, float* out_gelu, const float* inp, const float* weight,
                         const float* bias, int N, int C, int OC) {
  forward_tiles(out, out_gelu, inp, weight, bias, N, C, OC);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  const int row_tiles = tiles(N, kRowTile);
  const int out_tiles = tiles(OC, kOutTile), in_tiles = tiles(C, kInTile);
  const int weight_tiles = out_tiles * in_tiles;
  const int bias_blocks = dbias != nullptr ? tiles(OC, kBiasBlock) : 0;
  // The three kinds of work are independent tasks of unequal size in one dynamically scheduled
  // loop (largest first), so threads never idle while another works through a big tile. Which
  // thread runs a tile does not change what it computes.
  const int tasks = weight_tiles + row_tiles + bias_blocks;
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < tasks; ++task) {
    if (task < weight_tiles) {
      // dweight += dout^T @ inp for one (output, input) feature tile, summed over all N rows
      const int o0 = (task / in_tiles) * kOutTile, c0 = (task % in_tiles) * kInTile;
      const int orows = min_of(kOutTile, OC - o0), ccols = min_of(kInTile, C - c0);
      sgemm(true, false, orows, ccols, N, 1.0f, dout + o0, OC, inp + c0, C, 1.0f,
            dweight + static_cast<std::ptrdiff_t>(o0) * C + c0, C);
    } else if (task < weight_tiles + row_tiles) {
      // dinp = dout @ weight for one row tile
      const int n0 = (task - weight_tiles) * kRowTile, rows = min_of(kRowTile, N - n0);
      sgemm(false, false, rows, C, OC, 1.0f, dout + static_cast<std::ptrdiff_t>(n0) * OC, OC,
            weight, C, 0.0f, dinp + static_cast<std::ptrdiff_t>(n0) * C, C);
    } else {
      // dbias += column sums of dout for one block of columns (fixed summation order)
      const int o0 = (task - weight_tiles - row_tiles) * kBiasBlock;
      const int o1 = min_of(OC, o0 + kBiasBlock);
      float acc[kBiasBlock] = {};
      for (int n = 0; n < N; ++n) {
        const float* row = dout + static_cast<std::ptrdiff_t>(n) * OC;
        for (int o = o0; o < o1; ++o) acc[o - o0] += row[o];
      }
      for (int o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
    }
  }
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
