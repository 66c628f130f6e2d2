// The instruction sets whose kernel builds this CPU can run, for tests that hold each to the
// scalar build (the reference) bit for bit.
#pragma once

#include <vector>

#include "common/cpu_isa.hpp"

namespace longhaul::quant {

// Every ISA cpu_supports(), the scalar one first.
inline std::vector<Isa> runnable_isas() {
  std::vector<Isa> isas;
  for (const Isa isa : kAllIsas)
    if (cpu_supports(isa)) isas.push_back(isa);
  return isas;
}

}  // namespace longhaul::quant
