// Layer normalisation over the channel axis, eps = 1e-5 (PyTorch's default).
//   forward:  out = (inp - mean) * rstd * weight + bias, per row of C
//   backward: accumulates into dinp, dweight, dbias
#pragma once

#include "train/isa_namespace.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// inp, out: (N, C); weight, bias: (C); mean, rstd: (N) saved for the backward pass.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);

// Fused residual add + layer norm: residual = a + b, then out = layernorm(residual). Every
// block of the model ends in a residual add whose result the next LayerNorm reads at once; doing
// both per row while it is in cache saves a pass over memory (and a thread barrier).
// a, b, residual, out: (N, C); the rest as layernorm_forward.
void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd,
                                const float* a, const float* b, const float* weight,
                                const float* bias, int N, int C);

// dout, inp: (N, C); mean, rstd from the forward pass. dinp (N, C), dweight and dbias (C) are
// accumulated (+=), never overwritten.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C);

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
