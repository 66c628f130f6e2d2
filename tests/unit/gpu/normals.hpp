// Normally distributed floats for the GPU tests' inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace longhaul::gpu::testing {

// `count` draws of N(0, 1) from `seed`.
inline std::vector<float> normals(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count);
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace longhaul::gpu::testing
