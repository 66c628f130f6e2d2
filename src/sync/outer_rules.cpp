#include "sync/outer_rules.hpp"

namespace longhaul::sync {

void nesterov_step(std::span<float> theta, std::span<float> buffer, std::span<const float> g,
                   const NesterovParams& p, bool first) {
  for (size_t i = 0; i < theta.size(); ++i) nesterov_element(theta[i], buffer[i], g[i], p, first);
}

void co2_step(std::span<float> theta, std::span<float> m, std::span<const float> g,
              const Co2Params& p) {
  for (size_t i = 0; i < theta.size(); ++i) co2_element(theta[i], m[i], g[i], p);
}

float mix(float local, float global, float alpha) {
  if (alpha == 0.0f) return global;
  return alpha * local + (1.0f - alpha) * global;
}

}  // namespace longhaul::sync
