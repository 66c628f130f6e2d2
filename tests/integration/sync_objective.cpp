#include "sync_objective.hpp"

namespace longhaul::testing {
namespace {

constexpr size_t kBatch = 8;

// A small deterministic generator (splitmix64): the same numbers on every build.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), exact in f32.
float unit(uint64_t key) {
  return static_cast<float>(static_cast<int32_t>(mix(key) >> 40) - (1 << 23)) / float(1 << 23);
}

}  // namespace

RegressionTask::RegressionTask(size_t dim, uint32_t index) : dim_(dim), index_(index) {
  for (size_t j = 0; j < dim; ++j)
    hidden_.push_back(unit((uint64_t{index} << 32) ^ (j * 7919 + 1)));
}

std::vector<float> RegressionTask::initial(size_t dim) {
  std::vector<float> w(dim);
  for (size_t j = 0; j < dim; ++j) w[j] = 0.1f * unit(0xABCDEF00ull + j);
  return w;
}

void RegressionTask::step(std::span<float> w, uint64_t step, float lr) const {
  std::vector<float> grad(dim_, 0.0f), x(dim_);
  for (size_t b = 0; b < kBatch; ++b) {
    const uint64_t sample = (uint64_t{index_} << 48) ^ (step * kBatch + b) * 0x100000001B3ull;
    float y = 0.0f, pred = 0.0f;
    for (size_t j = 0; j < dim_; ++j) {
      x[j] = unit(sample + j);
      y += hidden_[j] * x[j];
      pred += w[j] * x[j];
    }
    const float err = pred - y;
    for (size_t j = 0; j < dim_; ++j) grad[j] += err * x[j];
  }
  const float scale = 2.0f * lr / static_cast<float>(kBatch);
  for (size_t j = 0; j < dim_; ++j) w[j] -= scale * grad[j];
}

}  // namespace longhaul::testing
