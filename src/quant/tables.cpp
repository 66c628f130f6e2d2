// The kernel tables of every ISA's build, and the one the process selected (kernels.hpp).
#include "quant/kernels.hpp"

namespace longhaul::quant {

// Each build's fillers (kernels.hpp), by the namespace it was compiled in.
namespace isa_scalar {
void fill_codec_kernels(Kernels& k);
void fill_reduce_kernels(Kernels& k);
}  // namespace isa_scalar
namespace isa_avx2 {
void fill_codec_kernels(Kernels& k);
void fill_reduce_kernels(Kernels& k);
}  // namespace isa_avx2
namespace isa_avx512 {
void fill_codec_kernels(Kernels& k);
void fill_reduce_kernels(Kernels& k);
}  // namespace isa_avx512

namespace {

template <void (*FillCodec)(Kernels&), void (*FillReduce)(Kernels&)>
Kernels make_table(Isa isa) {
  Kernels k{};
  k.isa = isa;
  FillCodec(k);
  FillReduce(k);
  return k;
}

}  // namespace

const Kernels& kernels_for(Isa isa) {
  static const Kernels kTables[kNumIsas] = {
      make_table<isa_scalar::fill_codec_kernels, isa_scalar::fill_reduce_kernels>(Isa::kScalar),
      make_table<isa_avx2::fill_codec_kernels, isa_avx2::fill_reduce_kernels>(Isa::kAvx2),
      make_table<isa_avx512::fill_codec_kernels, isa_avx512::fill_reduce_kernels>(Isa::kAvx512),
  };
  return kTables[static_cast<int>(isa)];
}

Result<const Kernels*> selected_kernels() {
  Result<Isa> isa = selected_isa();
  if (!isa) return isa.status();
  return &kernels_for(*isa);
}

}  // namespace longhaul::quant
