#include "common/cpu_isa.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

namespace longhaul {
namespace {

// libgcc's checks include the operating system's: AVX and AVX-512 count only where XCR0 shows the
// OS saves their registers.
bool detect(Isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi") &&
             __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("movbe") &&
             __builtin_cpu_supports("popcnt");
    case Isa::kAvx512:
      return detect(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

Result<Isa> from_environment() {
  const char* env = std::getenv("LONGHAUL_FORCE_ISA");
  if (env == nullptr || *env == '\0') return best_supported_isa();
  Result<Isa> isa = parse_isa(env);
  if (!isa) return isa.status().with_context("LONGHAUL_FORCE_ISA");
  if (!cpu_supports(*isa)) {
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("LONGHAUL_FORCE_ISA={}: this CPU cannot run {} (the widest it runs "
                              "is {})",
                              env, isa_name(*isa), isa_name(best_supported_isa())));
  }
  return isa;
}

// The selection: an ISA, or the environment's error. Read once; select_isa() replaces it.
struct Selection {
  std::atomic<int> isa{-1};  // -1: not an ISA (see error)
  Status error;              // written once, before isa is published as -2
};

Selection& selection() {
  static Selection s;
  static std::once_flag once;
  std::call_once(once, [] {
    Result<Isa> isa = from_environment();
    if (isa) {
      s.isa.store(static_cast<int>(*isa), std::memory_order_release);
    } else {
      s.error = isa.status();
      s.isa.store(-2, std::memory_order_release);
    }
  });
  return s;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "invalid";
}

Result<Isa> parse_isa(std::string_view text) {
  for (const Isa isa : kAllIsas)
    if (text == isa_name(isa)) return isa;
  return invalid_argument(
      fmt::format("unknown instruction set '{}' (scalar, avx2 or avx512)", text));
}

bool cpu_supports(Isa isa) {
  static const bool supported[kNumIsas] = {detect(Isa::kScalar), detect(Isa::kAvx2),
                                           detect(Isa::kAvx512)};
  const auto i = static_cast<int>(isa);
  return i >= 0 && i < kNumIsas && supported[i];
}

Isa best_supported_isa() {
  if (cpu_supports(Isa::kAvx512)) return Isa::kAvx512;
  if (cpu_supports(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Result<Isa> selected_isa() {
  Selection& s = selection();
  const int isa = s.isa.load(std::memory_order_acquire);
  if (isa < 0) return s.error;
  return static_cast<Isa>(isa);
}

Status select_isa(Isa isa) {
  if (!cpu_supports(isa)) {
    return {LH_ERR_UNSUPPORTED, fmt::format("this CPU cannot run {} (the widest it runs is {})",
                                            isa_name(isa), isa_name(best_supported_isa()))};
  }
  selection().isa.store(static_cast<int>(isa), std::memory_order_release);
  return Status::ok();
}

}  // namespace longhaul
