// The namespace of one instruction set's build of the trainer's kernels (common/cpu_isa.hpp).
//
// src/train/CMakeLists.txt compiles the kernel files (attention, embedding, gelu, layernorm,
// linear, softmax_cross_entropy and kernel_table.cpp) once per ISA with its own -march and
// LH_TRAIN_ISA_NS (isa_scalar, isa_avx2, isa_avx512). Their functions, and the inline ones of
// fast_math.hpp, live in that inline namespace, so the builds never share a symbol the linker
// could merge (src/quant/isa_namespace.hpp says why that matters). Every other file sees the
// namespace `dispatched`, whose functions (kernel_dispatch.cpp) call the selected ISA's build
// through its table (kernels.hpp). train_isa_symbols checks the objects.
#pragma once

#ifndef LH_TRAIN_ISA_NS
#define LH_TRAIN_ISA_NS dispatched
#endif

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

// The kernel files use this and the builtins (__builtin_sqrtf, __builtin_logf, __builtin_bit_cast)
// in place of std::min, std::sqrt, std::log and std::bit_cast, and memcpy in place of std::copy:
// a standard template or inline overload has the same mangled name in every ISA's build, and an
// unoptimised build emits out-of-line copies of it.
[[gnu::always_inline]] inline int min_of(int a, int b) {
  return b < a ? b : a;
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
