// Softmax over the vocabulary fused with the cross-entropy loss: one pass reads the logits once
// and writes the probabilities the backward pass needs. Loss in nats, mean over positions.
//   forward:  probs = softmax(logits); losses[n] = -log probs[n][targets[n]]
//   backward: dlogits = (probs - onehot(targets)) / N
#pragma once

#include "train/isa_namespace.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// logits, probs: (N, V); targets: (N); losses: (N). Returns the mean loss (summed in double in
// index order, so it is reproducible).
float softmax_cross_entropy_forward(float* probs, float* losses, const float* logits,
                                    const int* targets, int N, int V);

// Writes (overwrites) dlogits (N, V) for the mean loss.
void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int* targets, int N,
                                    int V);

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
