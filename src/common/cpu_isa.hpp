// Which vector instruction set the kernels of this process run: every kernel with per-ISA forms
// (the reduction and quantization kernels of src/quant, the trainer's of src/train) is compiled
// once per ISA below and picked at run time, so one build runs on every x86-64.
//
//   scalar  baseline x86-64 (SSE2): the portable loops, the reference every other path is held to
//   avx2    the same loops built for x86-64-v3 (AVX2, FMA, F16C, BMI1/2; FMA never contracted)
//   avx512  x86-64-v4 (AVX-512 F/BW/CD/DQ/VL): the portable loops plus the hand-written
//           AVX-512 kernels of src/quant
//
// The choice: the variable LONGHAUL_FORCE_ISA ("scalar", "avx2", "avx512"), read once at the first
// call, when set and not empty; otherwise the widest ISA this CPU and its operating system
// support. Forcing an ISA the CPU cannot run, or an unknown name, is an error every call that runs
// a kernel returns (never a silent fallback, never SIGILL); quant::encode_portable, the reference
// the tests compare with, runs the scalar build whatever the variable says.
//
// Threads: every function is safe to call from any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.hpp"

namespace longhaul {

enum class Isa : std::uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
inline constexpr int kNumIsas = 3;
inline constexpr Isa kAllIsas[kNumIsas] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};

// "scalar", "avx2", "avx512"; "invalid" outside the enumeration.
std::string_view isa_name(Isa isa);

// The ISA named `text` (one of isa_name's names); LH_ERR_INVALID_ARGUMENT otherwise.
Result<Isa> parse_isa(std::string_view text);

// Whether this CPU and operating system can execute `isa`'s kernels (scalar: always).
bool cpu_supports(Isa isa);

// The widest ISA cpu_supports().
Isa best_supported_isa();

// The ISA the kernels run: LONGHAUL_FORCE_ISA's, or best_supported_isa() when it is unset or
// empty. LH_ERR_INVALID_ARGUMENT for an unknown name, LH_ERR_UNSUPPORTED for an ISA this CPU cannot
// run; the same answer on every call unless select_isa() changes it.
Result<Isa> selected_isa();

// Makes `isa` the selected one from now on, for the whole process (tests and tools that compare
// paths). LH_ERR_UNSUPPORTED, and no change, when the CPU cannot run it. A kernel already running
// finishes on the ISA it started with.
Status select_isa(Isa isa);

}  // namespace longhaul
