// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_: the L2 norm over all
// gradients; when it exceeds max_norm every gradient is scaled by max_norm / (norm + 1e-6).
#pragma once

#include <span>

namespace longhaul::train {

// The L2 norm of grads, summed in double over fixed chunks combined in order: the same value
// whatever the thread count.
double global_norm(std::span<const float> grads);

// Clips in place; returns the norm before clipping. max_norm <= 0 disables clipping.
double clip_grad_norm(std::span<float> grads, double max_norm);

}  // namespace longhaul::train
