// The kernel tables of every ISA's build, and the one the process selected (kernels.hpp).
#include "quant/kernels.hpp"

namespace longhaul::quant {

// Each build's entries (kernels.hpp), by the namespace it was compiled in.
namespace isa_scalar {
extern const CodecEntries kCodecEntries;
extern const ReduceEntries kReduceEntries;
}  // namespace isa_scalar
namespace isa_avx2 {
extern const CodecEntries kCodecEntries;
extern const ReduceEntries kReduceEntries;
}  // namespace isa_avx2
namespace isa_avx512 {
extern const CodecEntries kCodecEntries;
extern const ReduceEntries kReduceEntries;
}  // namespace isa_avx512

namespace {

// Copies the entries' addresses: runs no code of the ISA's build.
Kernels make_table(Isa isa, const CodecEntries& codec, const ReduceEntries& reduce) {
  Kernels k{codec, reduce};
  k.isa = isa;
  return k;
}

}  // namespace

const Kernels& kernels_for(Isa isa) {
  static const Kernels kTables[kNumIsas] = {
      make_table(Isa::kScalar, isa_scalar::kCodecEntries, isa_scalar::kReduceEntries),
      make_table(Isa::kAvx2, isa_avx2::kCodecEntries, isa_avx2::kReduceEntries),
      make_table(Isa::kAvx512, isa_avx512::kCodecEntries, isa_avx512::kReduceEntries),
  };
  return kTables[static_cast<int>(isa)];
}

Result<const Kernels*> selected_kernels() {
  Result<Isa> isa = selected_isa();
  if (!isa) return isa.status();
  return &kernels_for(*isa);
}

}  // namespace longhaul::quant
