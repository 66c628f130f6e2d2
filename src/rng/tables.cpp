// The perturbation kernel tables of every ISA's build, and the selected one (kernels.hpp).
#include "rng/kernels.hpp"

namespace longhaul::rng {

namespace isa_scalar {
extern const RngEntries kRngEntries;
}  // namespace isa_scalar
namespace isa_avx2 {
extern const RngEntries kRngEntries;
}  // namespace isa_avx2
namespace isa_avx512 {
extern const RngEntries kRngEntries;
}  // namespace isa_avx512

const RngEntries& rng_kernels_for(Isa isa) {
  static const RngEntries* const kTables[kNumIsas] = {
      &isa_scalar::kRngEntries, &isa_avx2::kRngEntries, &isa_avx512::kRngEntries};
  return *kTables[static_cast<int>(isa)];
}

Result<const RngEntries*> selected_rng_kernels() {
  Result<Isa> isa = selected_isa();
  if (!isa) return isa.status();
  return &rng_kernels_for(*isa);
}

}  // namespace longhaul::rng
