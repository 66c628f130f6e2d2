// Elementwise reduction kernels of the collectives: dst = dst op src over typed buffers.
//
// Contract, common to every function here:
// - Buffers hold `count` elements of `dtype` in native (little-endian) layout, aligned to the
//   element size (a misaligned pointer is LH_ERR_INVALID_ARGUMENT). dst and src may be the same
//   buffer but must not partially overlap.
// - A null pointer with count > 0, a value outside the DType/ReduceOp enumerations, or an n of 0
//   is LH_ERR_INVALID_ARGUMENT; a combination that is not served is LH_ERR_UNSUPPORTED. On any
//   error nothing is written.
// - Results are bit-identical on every machine: each element is computed by the same sequence of
//   single IEEE 754 operations (no FMA, no reassociation) in the default floating-point
//   environment (see fp_env.hpp). The loops auto-vectorize under -O2/-O3 without -ffast-math
//   (checked with -fopt-info-vec, see docs/quantization.md).
//
// Semantics per type:
// - f32, f64: IEEE arithmetic. min/max propagate NaN (a NaN on either side gives NaN); when the two
//   compare equal (+0 and -0) the result is src's value.
// - f16, bf16: each element is widened to f32 (exactly), combined in f32, and rounded back to
//   nearest, ties to even. One rounding per reduce_into call, so a ring of P peers rounds P-1
//   times; use accumulate_f32/store_from_f32 to round once.
// - Integers: sum, avg and prod wrap around modulo 2^bits (computed in unsigned arithmetic, no
//   undefined behaviour). avg is the wrapped sum divided by n, truncated toward zero.
#pragma once

#include <cstddef>
#include <span>

#include "common/status.hpp"
#include "quant/dtype.hpp"

namespace longhaul::quant {

// OK if reduce_into/finalize_avg serve (dtype, op). Every valid pair is served today; invalid
// enumerator values are LH_ERR_INVALID_ARGUMENT.
Status check_supported(DType dtype, ReduceOp op);

// dst[i] = dst[i] op src[i] for i < count. kAvg sums (finish with finalize_avg).
Status reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);

// Turns a sum over n participants into the average, in place: floats are divided by n (a true
// division, correctly rounded; f16/bf16 divide in f32 and round back), integers are divided by n
// truncating toward zero (C++ integer division). n must be in [1, 2^31].
Status finalize_avg(void* dst, std::size_t count, DType dtype, std::size_t n);

// The f32 accumulation path of the quantized all-reduce: acc[i] += float(src[i]).
// dtype must be f32, f16 or bf16 (exact widening); others are LH_ERR_UNSUPPORTED.
Status accumulate_f32(float* acc, const void* src, std::size_t count, DType dtype);

// dst[i] = acc[i] converted to dtype (f32: copied; f16/bf16: rounded to nearest even).
// dtype must be f32, f16 or bf16; others are LH_ERR_UNSUPPORTED.
Status store_from_f32(void* dst, const float* acc, std::size_t count, DType dtype);

// A half-precision sum rounded once, in one pass over the operands:
//   dst[i] = dtype((((-0 + float(dst[i])) + float(sources[0][i])) + ... ) / average_over)
// with every operation in f32 and the division only when average_over > 1. The bits are those of
// accumulate_f32 into a -0 accumulator (dst first, then each source in order), finalize_avg in
// f32, and store_from_f32; without the f32 accumulator array those need, and its passes over it.
// dtype must be f16 or bf16 (LH_ERR_UNSUPPORTED otherwise); every source holds `count` elements
// of it; average_over must be in [1, 2^31].
Status sum_widened(void* dst, std::span<const void* const> sources, std::size_t count, DType dtype,
                   std::size_t average_over);

}  // namespace longhaul::quant
