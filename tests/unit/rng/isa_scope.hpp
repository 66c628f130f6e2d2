// Runs a test on one ISA's kernels: selects it for the process (common/cpu_isa.hpp) and puts the
// previous selection back on exit, as LONGHAUL_FORCE_ISA would for a whole run.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/cpu_isa.hpp"

namespace longhaul::rng {

class IsaScope {
 public:
  explicit IsaScope(Isa isa) {
    Result<Isa> previous = selected_isa();
    if (previous) previous_ = *previous;
    ok_ = select_isa(isa).is_ok();
  }
  ~IsaScope() { (void)select_isa(previous_); }
  bool ok() const { return ok_; }

  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  Isa previous_ = Isa::kScalar;
  bool ok_ = false;
};

// The test's ISA parameter, named for gtest ("scalar", "avx2", "avx512").
inline std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

}  // namespace longhaul::rng

// In a TEST_P over Isa: skip, saying why, where this CPU cannot run the parameter's kernels.
#define LH_SKIP_UNLESS_CPU_RUNS(isa)  \
  if (!::longhaul::cpu_supports(isa)) \
  GTEST_SKIP() << "this CPU cannot run the " << ::longhaul::isa_name(isa) << " kernels"
