#include "train/grad_clip.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace longhaul::train {

namespace {
constexpr long kChunk = 1 << 14;
}

double global_norm(std::span<const float> grads) {
  const long n = static_cast<long>(grads.size());
  const long chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
  const float* g = grads.data();
#pragma omp parallel for schedule(static)
  for (long c = 0; c < chunks; ++c) {
    const long begin = c * kChunk, end = std::min(n, begin + kChunk);
    double sum = 0.0;
    for (long i = begin; i < end; ++i) sum += static_cast<double>(g[i]) * g[i];
    partial[static_cast<std::size_t>(c)] = sum;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return std::sqrt(total);
}

double clip_grad_norm(std::span<float> grads, double max_norm) {
  const double norm = global_norm(grads);
  if (max_norm <= 0.0 || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  const long n = static_cast<long>(grads.size());
  float* g = grads.data();
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) g[i] *= scale;
  return norm;
}

}  // namespace longhaul::train
