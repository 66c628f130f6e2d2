// Token + position embedding: out[b][t] = wte[tokens[b][t]] + wpe[t].
#pragma once

#include "train/isa_namespace.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// tokens: (B, T) in [0, V); wte: (V, C); wpe: (>= T, C); out: (B, T, C).
void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C);

// dout: (B, T, C). Accumulates (+=) into dwte (V, C) and dwpe (T, C). Each gradient row is
// summed in (b, t) order whatever the thread count, so the result is bit-reproducible.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C);

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
