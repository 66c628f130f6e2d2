// exp and tanh written so that loops calling them auto-vectorize. The C library's expf/tanhf are
// opaque calls that keep GELU and the softmaxes scalar (they were most of the non-GEMM time).
// exp_approx is Cephes' expf: round-to-nearest range reduction and a degree-6 polynomial, within
// 2 ulp of expf over [-87, 88]; inputs are clamped to that range.
#pragma once

#include <bit>
#include <cstdint>

namespace longhaul::train {

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
  return e * std::bit_cast<float>(bits);
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): saturates cleanly to +-1; absolute error ~1e-7 near 0.
inline float tanh_approx(float u) {
  return 1.0f - 2.0f / (exp_approx(2.0f * u) + 1.0f);
}

}  // namespace longhaul::train
