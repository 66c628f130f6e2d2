// The namespace of one instruction set's build of the perturbation kernels (common/cpu_isa.hpp).
//
// src/rng/CMakeLists.txt compiles rng_kernels.cpp once per ISA, each with its own -march and
// LH_RNG_ISA_NS (isa_scalar, isa_avx2, isa_avx512), as src/quant does (quant/isa_namespace.hpp
// says why): every inline function those builds include from src/rng lives in that namespace, so
// the linker can never hand an AVX-512 copy of philox4x32_10 to the scalar path. Files built once
// get isa_any. rng_isa_symbols checks the per-ISA objects.
#pragma once

#ifndef LH_RNG_ISA_NS
#define LH_RNG_ISA_NS isa_any
#endif
