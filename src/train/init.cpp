#include "train/init.hpp"

#include <cmath>
#include <string>

#include "train/param_layout.hpp"
#include "train/rng.hpp"

namespace longhaul::train {

void init_parameters(float* params, const GptConfig& config, std::uint64_t seed) {
  const std::vector<TensorSpec> specs = parameter_layout(config);
  const double residual_std = 0.02 / std::sqrt(2.0 * config.layers);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    float* p = params + s.offset;
    const bool is_norm_weight = s.name == "ln1_w" || s.name == "ln2_w" || s.name == "lnf_w";
    if (!s.decay) {  // biases and norms
      for (std::size_t j = 0; j < s.size; ++j) p[j] = is_norm_weight ? 1.0f : 0.0f;
      continue;
    }
    const bool residual_proj = s.name == "attproj_w" || s.name == "fcproj_w";
    const double std = residual_proj ? residual_std : 0.02;
    Rng rng(mix_seed(seed, i));
    for (std::size_t j = 0; j < s.size; ++j) p[j] = static_cast<float>(std * rng.normal());
  }
}

}  // namespace longhaul::train
