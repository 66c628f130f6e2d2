// exp and tanh written so that loops calling them auto-vectorize. The C library's expf/tanhf are
// opaque calls that keep GELU and the softmaxes scalar (they were most of the non-GEMM time).
// exp_approx is Cephes' expf: round-to-nearest range reduction and a degree-6 polynomial, within
// 2 ulp of expf over [-87, 88]; inputs are clamped to that range.
#pragma once

#include <bit>
#include <cstdint>
#include "train/isa_namespace.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // n = round(x / ln 2) via the 1.5 * 2^23 trick (exact: no contraction, round-to-nearest).
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  // r = x - n ln2, with ln2 split in two so the product is exact in the high part.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  return e * __builtin_bit_cast(float, bits);
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): saturates cleanly to +-1; absolute error ~1e-7 near 0.
inline float tanh_approx(float u) {
  return 1.0f - 2.0f / (exp_approx(2.0f * u) + 1.0f);
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// Reductions the compiler can vectorise without -ffast-math: kLanes interleaved partial results
// (lane j takes elements j, j + kLanes, ...) combined in a fixed order at the end. A plain
// `sum += x[i]` loop is a chain of dependent scalar adds, because reassociating it would change
// the result; here the order is written in the source, so it is the same on any vector width
// and any machine. term(i) is the i-th value (a lambda, inlined).
inline constexpr int kLanes = 16;

template <class Term>
inline float lane_sum(int n, Term term) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += term(i + j);
  }
  for (int j = 0; i + j < n; ++j) acc[j] += term(i + j);
  float total = 0.0f;
  for (int j = 0; j < kLanes; ++j) total += acc[j];
  return total;
}

// max of x[0..n), n >= 1.
inline float lane_max(const float* x, int n) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = x[0];
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = acc[0];
  for (int j = 1; j < kLanes; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
