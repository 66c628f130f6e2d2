// The perturbation kernels of one instruction set (common/cpu_isa.hpp), as a table the entry
// points of perturbation.hpp call through. Internal to lh_rng and its tests.
//
// rng_kernels.cpp is compiled once per ISA, each build in its own namespace (isa_namespace.hpp)
// with its own table, as src/quant's kernels are. Every table computes the same bits: the Philox
// words are integer arithmetic, and each float result is one IEEE addition (or none) of the same
// two operands at every width (-ffp-contract=off; the entry points pin the default FP
// environment). tests/unit/rng/philox_test.cpp holds every table this CPU runs to the scalar one.
//
// Entries require what the entry points check (sizes, the 2^39-element bound) and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/cpu_isa.hpp"
#include "common/status.hpp"
#include "rng/isa_namespace.hpp"
#include "rng/stream.hpp"

namespace longhaul::rng {

struct RngEntries {
  // out[4 i + w] = word w of block first_block + i (counter word 0 wraps modulo 2^32), i < count.
  void (*philox_words)(const PhiloxStream& s, std::uint32_t first_block, std::size_t count,
                       std::uint32_t* out);
  // out[i] = in[i] + c * z[first + i] for i < n, z = +-1 (perturbation.hpp's sign layout); with in
  // null, out[i] = c * z[first + i]. in may equal out (in place).
  void (*add_signed)(const PhiloxStream& s, std::uint64_t first, const float* in, float* out,
                     std::size_t n, float c);
};

// Each ISA's build exports its table as constant data in its own namespace (no code of a build
// runs before the CPU is known to support it).
inline namespace LH_RNG_ISA_NS {
extern const RngEntries kRngEntries;
}  // namespace LH_RNG_ISA_NS

// The table of `isa`, whether or not this CPU can run it (check cpu_supports() first).
const RngEntries& rng_kernels_for(Isa isa);

// The table of selected_isa(), or its error (an unknown or unsupported LONGHAUL_FORCE_ISA).
Result<const RngEntries*> selected_rng_kernels();

}  // namespace longhaul::rng
