// GELU, tanh approximation (GPT-2; PyTorch's nn.GELU(approximate="tanh")):
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#pragma once

#include "train/isa_namespace.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// inp, out: (N) elementwise.
void gelu_forward(float* out, const float* inp, long N);
// The same in the calling thread only (for kernels that fuse it into their own tiles).
void gelu_forward_serial(float* out, const float* inp, long N);
// Writes dinp = gelu'(inp) * dout (the pre-activation has one consumer).
void gelu_backward(float* dinp, const float* inp, const float* dout, long N);

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
