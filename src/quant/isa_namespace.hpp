// The namespace of one instruction set's build of the kernels (common/cpu_isa.hpp).
//
// src/quant/CMakeLists.txt compiles the kernel files once per ISA, each with its own -march and
// LH_QUANT_ISA_NS (isa_scalar, isa_avx2, isa_avx512). Everything those files define, and every
// inline function of the headers they include from src/quant, lives in the inline namespace
// LH_QUANT_ISA_NS, so each build has its own mangled names. Without it, an inline function
// compiled for AVX-512 in one object and for SSE2 in another would be one symbol to the linker,
// which keeps either copy: an AVX-512 instruction could then run on a CPU without it. Files built
// once (the public entry points, the tests) get isa_any. quant_isa_symbols checks that the
// per-ISA objects define no shared symbol outside their namespace.
#pragma once

#ifndef LH_QUANT_ISA_NS
#define LH_QUANT_ISA_NS isa_any
#endif

#include <cstddef>

namespace longhaul::quant {
inline namespace LH_QUANT_ISA_NS {

// The kernel files use this and __builtin_bit_cast in place of std::min and std::bit_cast, and
// plain loops in place of std::fill_n: a standard template has the same mangled name in every
// ISA's build, and an unoptimised build emits out-of-line copies of it.
[[gnu::always_inline]] inline std::size_t min_of(std::size_t a, std::size_t b) {
  return b < a ? b : a;
}

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant
