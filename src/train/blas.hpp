// The one matrix product the trainer needs, from OpenBLAS, loaded at first use.
//
// Why loaded and not linked: Debian's OpenBLAS (0.3.21) does not recognise CPUs newer than
// Cooper Lake and falls back to its SSE3 "Prescott" kernels, 4-5x slower than its AVX-512 ones on
// those machines. It picks its kernels in a load-time constructor from OPENBLAS_CORETYPE, which a
// linked library would read before main() could set it. Loading it ourselves lets us set it
// first, unless the user already set it: to the kernel set of the ISA the process runs
// (common/cpu_isa.hpp; LONGHAUL_FORCE_ISA included): SkylakeX for avx512, Haswell for avx2,
// Prescott for scalar (SSE3, which every x86-64 CPU since 2005 has). The set is chosen once, when
// OpenBLAS loads: a later select_isa() changes our kernels, not OpenBLAS's.
//
// Threading: every call runs single-threaded in the calling thread; the kernels split work
// across OpenMP threads themselves, so there is one thread pool and no oversubscription.
#pragma once

#include <string>

#include "common/status.hpp"

namespace longhaul::train {

// Loads OpenBLAS (once; thread-safe). Gpt::create() calls it so a missing library is an error
// there rather than an abort in a kernel.
Status blas_init();

// OpenBLAS's name for the kernel set in use ("SkylakeX", "Haswell", ...), after blas_init().
std::string blas_core();

// Row-major C = alpha * op(A) * op(B) + beta * C with op(A) (M, K), op(B) (K, N), C (M, N).
// Aborts with a message if OpenBLAS cannot be loaded (blas_init() reports that as a Status).
void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace longhaul::train
