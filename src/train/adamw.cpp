#include "train/adamw.hpp"

#include <cmath>
#include <cstddef>

namespace longhaul::train {

AdamW::AdamW(const GptConfig& config, const AdamWOptions& options)
    : options_(options),
      layout_(parameter_layout(config)),
      m_(parameter_count(config), 0.0f),
      v_(parameter_count(config), 0.0f) {}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  ++t_;
  const double t = static_cast<double>(t_);
  // Scalars in double then rounded once, as PyTorch does with its Python-float hyperparameters.
  const AdamWOptions& o = options_;
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(o.beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(o.beta2, t)));
  const float one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  const float beta2 = static_cast<float>(o.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  const float eps = static_cast<float>(o.eps);
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * o.weight_decay);
  float* p = params.data();
  const float* g = grads.data();
  float* m = m_.data();
  float* v = v_.data();
  // One parallel region for all tensors (a barrier per tensor costs more than the work).
#pragma omp parallel
  for (const TensorSpec& s : layout_) {
    const long begin = static_cast<long>(s.offset), end = static_cast<long>(s.offset + s.size);
    const float tensor_decay = s.decay ? decay : 1.0f;
#pragma omp for schedule(static) nowait
    for (long i = begin; i < end; ++i) {
      const float pi = p[i] * tensor_decay;
      const float mi = m[i] + one_minus_beta1 * (g[i] - m[i]);
      const float vi = v[i] * beta2 + one_minus_beta2 * (g[i] * g[i]);
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      p[i] = pi - step_size * (mi / denom);
      m[i] = mi;
      v[i] = vi;
    }
  }
}

}  // namespace longhaul::train
