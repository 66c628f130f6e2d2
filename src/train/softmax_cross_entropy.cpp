#include "train/softmax_cross_entropy.hpp"

#include <cmath>
#include <cstddef>

#include "train/fast_math.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

float softmax_cross_entropy_forward(float* probs, float* losses, const float* logits,
                                    const int* targets, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* z = logits + static_cast<std::ptrdiff_t>(n) * V;
    float* p = probs + static_cast<std::ptrdiff_t>(n) * V;
    const float maxv = lane_max(z, V);
    for (int v = 0; v < V; ++v) p[v] = exp_approx(z[v] - maxv);
    const float sum = lane_sum(V, [p](int v) { return p[v]; });
    const float inv = 1.0f / sum;
    for (int v = 0; v < V; ++v) p[v] *= inv;
    // log-sum-exp form: exact where probs[target] would underflow
    losses[n] = __builtin_logf(sum) - (z[targets[n]] - maxv);
  }
  double total = 0.0;
  for (int n = 0; n < N; ++n) total += losses[n];
  return static_cast<float>(total / N);
}

void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int* targets, int N,
                                    int V) {
  const float inv_n = 1.0f / static_cast<float>(N);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* p = probs + static_cast<std::ptrdiff_t>(n) * V;
    float* d = dlogits + static_cast<std::ptrdiff_t>(n) * V;
    for (int v = 0; v < V; ++v) d[v] = p[v] * inv_n;
    d[targets[n]] -= inv_n;
  }
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
