// The outer rules as each ISA's build runs them (outer_rules_isa_build.cpp), for
// outer_rules_isa_test.cpp.
#pragma once

#include <cstddef>
#include <vector>

namespace longhaul::sync::test {

struct OuterRulesCase {
  std::vector<float> average;  // the round's averaged pseudo-gradient
  float lr = 0.7f;
  float momentum = 0.9f;
  float gap_penalty = 1.0f;
  float clip = 0.0f;
  bool co2 = false;
  bool eager = false;
  bool first = false;
};

// Everything a round reads and writes, per element.
struct OuterRulesState {
  std::vector<float> theta, momentum, deviation, local, staged;
};

// What one build reads: plain pointers, so that the per-ISA files instantiate nothing of
// std::vector (at -O0 its members would be symbols shared between the builds).
struct OuterRulesArrays {
  std::size_t n;
  const float* average;
  float *theta, *momentum, *deviation, *local, *staged;
};

void apply_outer_rules_scalar(const OuterRulesCase& c, const OuterRulesArrays& a);
void apply_outer_rules_avx2(const OuterRulesCase& c, const OuterRulesArrays& a);
void apply_outer_rules_avx512(const OuterRulesCase& c, const OuterRulesArrays& a);

inline OuterRulesArrays arrays_of(const OuterRulesCase& c, OuterRulesState& s) {
  return {s.theta.size(),     c.average.data(), s.theta.data(), s.momentum.data(),
          s.deviation.data(), s.local.data(),   s.staged.data()};
}

}  // namespace longhaul::sync::test
