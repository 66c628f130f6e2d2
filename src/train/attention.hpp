// Causal multi-head self-attention core (the projections around it are linear layers).
// For each batch b and head h, with q, k, v the head's (T, hs) slices of qkv:
//   att = softmax(q k^T / sqrt(hs)) with att[t][s] = 0 for s > t (causal)
//   out = att v
// The per-head products are BLAS GEMMs over blocks of 32 query rows, each against only the
// key/value positions it may attend to, so the masked triangle beyond the diagonal blocks is
// never computed. Heads run in parallel.
#pragma once

#include "train/isa_namespace.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// qkv: (B, T, 3C) with q, k, v concatenated along the last axis, heads contiguous inside each.
// out: (B, T, C). att: (B, NH, T, T) receives the probabilities (kept for the backward pass).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);

// dout: (B, T, C); qkv and att from the forward pass. dqkv (B, T, 3C) is written.
// scratch: (B, NH, T, T) floats, overwritten.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH);

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
