// AdamW over the flat parameter buffer, the same arithmetic as torch.optim.AdamW (foreach=False):
//   p *= 1 - lr * wd                        (decoupled decay; matrices and embeddings only)
//   m  = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The moments are flat buffers laid out like the parameters, so they can be synced as a whole.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.hpp"
#include "train/config.hpp"
#include "train/param_layout.hpp"

namespace longhaul::train {

// Doubles, as PyTorch's Python-float hyperparameters: derived scalars such as 1 - beta2 are
// formed in double and rounded to float once.
struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(const GptConfig& config, const AdamWOptions& options);

  // One step at learning rate lr. params and grads: parameter_count(config) floats.
  void step(std::span<float> params, std::span<const float> grads, float lr);

  const AdamWOptions& options() const { return options_; }
  std::int64_t steps_taken() const { return t_; }
  std::span<float> m() { return m_; }
  std::span<float> v() { return v_; }
  std::span<const float> m() const { return m_; }
  std::span<const float> v() const { return v_; }
  // Restores the state of a checkpoint (moments are copied in through m() and v()).
  void set_steps_taken(std::int64_t t) { t_ = t; }

 private:
  AdamWOptions options_;
  std::vector<TensorSpec> layout_;
  std::vector<float> m_, v_;
  std::int64_t t_ = 0;
};

}  // namespace longhaul::train
