// Deterministic GPT-2 style initialisation from a seed:
//   matrices and embeddings ~ N(0, 0.02); the two projections back into the residual stream
//   (attproj_w, fcproj_w) ~ N(0, 0.02 / sqrt(2 L)); biases 0; LayerNorm weights 1.
// Each tensor draws from its own stream (seed mixed with the tensor's index), so adding a tensor
// never changes the others.
#pragma once

#include <cstdint>

#include "train/config.hpp"

namespace longhaul::train {

// params: parameter_count(config) floats laid out by parameter_layout(config).
void init_parameters(float* params, const GptConfig& config, std::uint64_t seed);

}  // namespace longhaul::train
