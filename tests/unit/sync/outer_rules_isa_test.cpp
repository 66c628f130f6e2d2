// The sync engine's outer rules (DiLoCo's Nesterov, CO2's clipped heavy ball, eager's own part)
// give the same bits in every ISA's build this CPU runs: members on different CPUs, or with
// binaries built for other machines, must compute one θ_g. Each build runs several rounds on the
// same inputs, special values included, and every array is compared bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "common/cpu_isa.hpp"
#include "outer_rules_isa_build.hpp"

namespace longhaul::sync::test {
namespace {

using Apply = void (*)(const OuterRulesCase&, const OuterRulesArrays&);

Apply apply_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return apply_outer_rules_avx512;
    case Isa::kAvx2:
      return apply_outer_rules_avx2;
    case Isa::kScalar:
      break;
  }
  return apply_outer_rules_scalar;
}

std::vector<float> values(std::size_t n, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = normal(rng);
    switch (i % 97) {
      case 3:
        v[i] = std::numeric_limits<float>::denorm_min();
        break;
      case 5:
        v[i] = -0.0f;
        break;
      case 7:
        v[i] = 3e38f;  // overflows on the way
        break;
      case 11:
        v[i] = std::ldexp(1.0f, -140);
        break;
      default:
        break;
    }
  }
  return v;
}

OuterRulesState initial_state(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  OuterRulesState s;
  s.theta = values(n, rng, 1.0f);
  s.momentum = values(n, rng, 0.01f);
  s.deviation = values(n, rng, 0.001f);
  s.local = values(n, rng, 1.0f);
  s.staged.assign(n, 0.0f);
  return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_same(const OuterRulesState& got, const OuterRulesState& want, const std::string& what) {
  EXPECT_TRUE(same_bits(got.theta, want.theta)) << what << ": theta";
  EXPECT_TRUE(same_bits(got.momentum, want.momentum)) << what << ": momentum";
  EXPECT_TRUE(same_bits(got.deviation, want.deviation)) << what << ": deviation";
  EXPECT_TRUE(same_bits(got.local, want.local)) << what << ": local";
  EXPECT_TRUE(same_bits(got.staged, want.staged)) << what << ": staged";
}

struct Rule {
  const char* name;
  bool co2;
  bool eager;
  float clip;
  float gap_penalty;
};

TEST(SyncOuterRulesIsa, EveryRuleGivesTheSameBitsInEveryIsaBuild) {
  constexpr std::size_t kElements = 100003;  // not a whole number of vectors
  const Rule rules[] = {{"diloco nesterov", false, false, 0.0f, 1.0f},
                        {"co2", true, false, 0.0f, 2.0f},
                        {"co2 clipped", true, false, 0.05f, 2.0f},
                        {"eager", false, true, 0.0f, 1.0f}};
  for (const Isa isa : kAllIsas) {
    if (isa == Isa::kScalar || !cpu_supports(isa)) continue;
    for (const Rule& rule : rules) {
      OuterRulesState want = initial_state(kElements, 17);
      OuterRulesState got = want;
      std::mt19937_64 rng(23);
      for (int round = 0; round < 4; ++round) {
        OuterRulesCase c;
        c.average = values(kElements, rng, 0.05f);
        c.co2 = rule.co2;
        c.eager = rule.eager;
        c.clip = rule.clip;
        c.gap_penalty = rule.gap_penalty;
        c.lr = rule.co2 ? 1.0f : 0.7f;
        c.momentum = rule.co2 ? 0.2f : 0.9f;
        c.first = round == 0;
        apply_outer_rules_scalar(c, arrays_of(c, want));
        apply_for(isa)(c, arrays_of(c, got));
        expect_same(
            got, want,
            std::string(isa_name(isa)) + " " + rule.name + " round " + std::to_string(round));
      }
    }
  }
}

}  // namespace
}  // namespace longhaul::sync::test
