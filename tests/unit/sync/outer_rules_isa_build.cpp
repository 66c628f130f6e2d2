// One ISA's build of the sync engine's outer rules, for outer_rules_isa_test.cpp: this file is
// compiled once per ISA (tests/unit/sync/CMakeLists.txt), with OUTER_RULES_ISA_NS naming the
// build. It runs the rules the way the engine's round loop does (engine_rounds.cpp), element by
// element over whole arrays, so the compiler vectorizes them at that ISA's width.
//
// The header is included inside the build's own namespace: its inline functions would otherwise
// be one symbol for every build, and the linker would keep one copy for all three.
#include <cstddef>
#include <span>

#include "outer_rules_isa_build.hpp"

namespace OUTER_RULES_ISA_NS {
#include "sync/outer_rules.hpp"
}  // namespace OUTER_RULES_ISA_NS

namespace longhaul::sync::test {

namespace rules = OUTER_RULES_ISA_NS::longhaul::sync;

void OUTER_RULES_ISA_FN(const OuterRulesCase& c, const OuterRulesArrays& a) {
  const rules::NesterovParams nesterov{c.lr, c.momentum};
  const rules::Co2Params co2{c.lr, c.momentum, c.gap_penalty, c.clip};
  const std::size_t n = a.n;
  float* theta = a.theta;
  float* momentum = a.momentum;
  float* deviation = a.deviation;
  float* local = a.local;
  float* staged = a.staged;
  const float* average = a.average;
  for (std::size_t i = 0; i < n; ++i) {
    float fresh = (c.eager ? theta[i] + deviation[i] : theta[i]) - local[i];
    if (!__builtin_isfinite(fresh)) fresh = 0.0f;  // std::isfinite would be shared
    if (c.co2)
      rules::co2_element(theta[i], momentum[i], average[i], co2);
    else
      rules::nesterov_element(theta[i], momentum[i], average[i], nesterov, c.first);
    local[i] = theta[i];
    if (c.eager) {
      const float start =
          rules::eager_restart_element(theta[i], momentum[i], fresh, nesterov, /*first=*/false);
      deviation[i] = start - theta[i];
      local[i] = theta[i] + deviation[i];
    }
    staged[i] = fresh;
  }
}

}  // namespace longhaul::sync::test
