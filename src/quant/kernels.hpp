// The kernels of one instruction set (common/cpu_isa.hpp), as a table the public entry points of
// codec.hpp and reduce.hpp call through. Internal to lh_quant and its tests.
//
// codec_kernels.cpp, reduce_kernels.cpp and e3m0.cpp are compiled once per ISA, each build in its
// own namespace (isa_namespace.hpp) with its own table. Every table computes the same bytes for
// the same input: the scalar build's portable loops are the reference, the AVX2 build is those
// loops vectorized (single IEEE operations, FMA never contracted: -ffp-contract=off), the AVX-512
// build adds hand-written loops proved equal where they are written. isa_test.cpp holds every
// table this CPU runs to the scalar one bit for bit.
//
// Every entry requires what the entry point of the same name in codec.hpp or reduce.hpp checks
// (sizes, alignment, a served dtype and op, count >= 1) and the default FP environment
// (fp_env.hpp); none checks anything itself.
#pragma once

#include <cstddef>

#include "common/cpu_isa.hpp"
#include "common/status.hpp"
#include "quant/codec.hpp"
#include "quant/dtype.hpp"
#include "quant/fp_env.hpp"
#include "quant/isa_namespace.hpp"
#include "quant/sink.hpp"

namespace longhaul::quant {

// codec.hpp: encode; decode, decode_accumulate and the residual (by sink);
// encode_with_error_feedback.
struct CodecEntries {
  void (*encode)(const float* x, std::size_t count, std::byte* out, Codec codec, std::size_t block);
  void (*decode)(const std::byte* in, std::size_t count, float* out, Codec codec, std::size_t block,
                 Sink sink);
  void (*encode_with_error_feedback)(const float* x, float* residual, std::size_t count,
                                     std::byte* out, Codec codec, std::size_t block);
};

// reduce.hpp, of the same names.
struct ReduceEntries {
  void (*reduce_into)(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
  void (*finalize_avg)(void* dst, std::size_t count, DType dtype, std::size_t n);
  void (*accumulate_f32)(float* acc, const void* src, std::size_t count, DType dtype);
  void (*store_from_f32)(void* dst, const float* acc, std::size_t count, DType dtype);
  void (*sum_widened)(void* dst, const void* const* sources, std::size_t num_sources,
                      std::size_t count, DType dtype, std::size_t average_over);
};

struct Kernels : CodecEntries, ReduceEntries {
  Isa isa = Isa::kScalar;
};

// Each ISA's build exports its codec entries (codec_kernels.cpp) and reduction entries
// (reduce_kernels.cpp) as constant data under its own namespace; tables.cpp names all three.
// Data, not a function that fills a table: no code of an ISA's build may run before the CPU is
// known to support it (a table filled by AVX-512 code raised SIGILL on a CPU without it).
inline namespace LH_QUANT_ISA_NS {
extern const CodecEntries kCodecEntries;
extern const ReduceEntries kReduceEntries;
}  // namespace LH_QUANT_ISA_NS

// The table of `isa`, whether or not this CPU can run it (calling one it cannot run is SIGILL:
// check cpu_supports() first). isa must be a valid enumerator.
const Kernels& kernels_for(Isa isa);

// The table of selected_isa(), or its error (an unknown or unsupported LONGHAUL_FORCE_ISA).
Result<const Kernels*> selected_kernels();

// What every public entry point does once its arguments are checked: call(table) on the selected
// ISA's table in the default FP environment (fp_env.hpp), or return the selection's error.
template <class Call>
Status run_selected(Call call) {
  Result<const Kernels*> k = selected_kernels();
  if (!k) return k.status();
  ScopedDefaultFpEnv fp_env;
  call(*k.value());
  return Status::ok();
}

}  // namespace longhaul::quant
