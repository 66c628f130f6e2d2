#include "train/gelu.hpp"

#include "train/fast_math.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

namespace {
constexpr float kScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCube = 0.044715f;

inline float gelu(float x) {
  const float u = kScale * (x + kCube * x * x * x);
  return 0.5f * x * (1.0f + tanh_approx(u));
}
}  // namespace

void gelu_forward(float* out, const float* inp, long N) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; ++i) out[i] = gelu(inp[i]);
}

void gelu_forward_serial(float* out, const float* inp, long N) {
  for (long i = 0; i < N; ++i) out[i] = gelu(inp[i]);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, long N) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; ++i) {
    const float x = inp[i];
    const float u = kScale * (x + kCube * x * x * x);
    const float th = tanh_approx(u);
    const float sech2 = 1.0f - th * th;
    const float grad =
        0.5f * (1.0f + th) + 0.5f * x * sech2 * kScale * (1.0f + 3.0f * kCube * x * x);
    dinp[i] = grad * dout[i];
  }
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
