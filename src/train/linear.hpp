// Fully connected layer, PyTorch's nn.Linear convention: weight is (OC, C), row-major.
//   forward:  out = inp @ weight^T + bias
//   backward: dinp = dout @ weight, dweight += dout^T @ inp, dbias += sum over rows of dout
// The matrix products go through BLAS (OpenBLAS), in fixed tiles spread over the OpenMP threads.
#pragma once

#include "train/isa_namespace.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// inp: (N, C); weight: (OC, C); bias: (OC) or nullptr; out: (N, OC).
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);

// linear_forward followed by GELU (gelu.hpp) on each tile while it is in cache: out receives
// the pre-activation (the backward pass needs it), out_gelu the activation; both (N, OC).
void linear_gelu_forward(float* out, float* out_gelu, const float* inp, const float* weight,
                         const float* bias, int N, int C, int OC);

// dout: (N, OC); inp: (N, C). Writes dinp (N, C): in this model every linear layer's input has
// one consumer, so overwriting saves zeroing it first. Accumulates (+=) into dweight (OC, C)
// and, when not nullptr, dbias (OC): the tied embedding gets gradient from two places.
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
