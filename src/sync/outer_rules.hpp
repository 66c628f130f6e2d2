// The outer update rules, element by element, in one fixed f32 order (no FMA contraction: the
// build uses -ffp-contract=off). Every peer applies them to bit-identical inputs, so every peer's
// θ_g stays bit-identical. docs/training.md writes each rule as an equation with its source.
#pragma once

#include <cstddef>
#include <span>

namespace longhaul::sync {

struct NesterovParams {
  float lr = 0.7f;
  float momentum = 0.9f;
};

// DiLoCo's outer step, PyTorch's SGD(momentum = μ, nesterov = True) on the pseudo-gradient g:
//   first round: b ← g;  later: b ← μ·b + g;   u ← g + μ·b;   θ ← θ − lr·u
// PyTorch copies the first gradient into the buffer rather than adding it to μ·0: the two differ
// only for a −0 gradient, and copying keeps the bits of g.
inline void nesterov_element(float& theta, float& buffer, float g, const NesterovParams& p,
                             bool first) {
  const float b = first ? g : p.momentum * buffer + g;
  buffer = b;
  const float u = g + p.momentum * b;
  theta = theta - p.lr * u;
}
void nesterov_step(std::span<float> theta, std::span<float> buffer, std::span<const float> g,
                   const NesterovParams& p, bool first);

struct Co2Params {
  float lr = 1.0f;           // α_o
  float momentum = 0.2f;     // β
  float gap_penalty = 1.0f;  // λ ≥ 1: the stale pseudo-gradient is divided by it
  float clip = 0.0f;         // φ > 0: m is clipped to [−φ, φ] element-wise; 0: off
};

// CO2's outer step on the average g of the round launched one round earlier: heavy-ball momentum
// with the staleness gap penalty and momentum clipping, then the parameters:
//   m ← clip(β·m + g / λ, φ);   θ ← θ − α_o·m
inline void co2_element(float& theta, float& m, float g, const Co2Params& p) {
  float v = p.momentum * m + g / p.gap_penalty;
  if (p.clip > 0.0f) v = v < -p.clip ? -p.clip : (v > p.clip ? p.clip : v);
  m = v;
  theta = theta - p.lr * v;
}
void co2_step(std::span<float> theta, std::span<float> m, std::span<const float> g,
              const Co2Params& p);

// Eager's restart point (docs/training.md, "Eager updates"): the round's mean is not known yet,
// so each peer restarts from a tentative Nesterov step of the shared state (θ_g, b) with its own
// fresh pseudo-gradient g_m standing in for the mean:
//   b' = first ? g_m : μ·b + g_m;   r = θ − lr·(g_m + μ·b')
// The step is linear in g, so the mean of the peers' restart points is the θ_g the round's mean
// gives once it arrives, one round later: DiLoCo's, bit for bit in exact arithmetic. Returns r;
// the shared state is not changed.
inline float eager_restart_element(float theta, float buffer, float fresh, const NesterovParams& p,
                                   bool first) {
  const float b = first ? fresh : p.momentum * buffer + fresh;
  return theta - p.lr * (fresh + p.momentum * b);
}

// θ_local ← α·θ_local + (1 − α)·θ_g (α = 0: θ_g, copied bit for bit).
float mix(float local, float global, float alpha);

}  // namespace longhaul::sync
