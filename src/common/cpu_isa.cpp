#include "common/cpu_isa.hpp"

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <mutex>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace longhaul {
namespace {

#if defined(__x86_64__)
struct CpuidRegisters {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegisters cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegisters r;
  // The largest leaf of the range (basic, or extended from 0x80000000) this one is in.
  if (static_cast<unsigned>(__get_cpuid_max(leaf & 0x80000000u, nullptr)) < leaf) return r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

// The register state the operating system saves on a context switch (XCR0): an instruction set
// is usable only where its registers are saved.
unsigned long long os_saved_state() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool all_bits(unsigned reg, std::initializer_list<int> bits) {
  for (const int b : bits)
    if (((reg >> b) & 1u) == 0) return false;
  return true;
}
#endif

// CPUID and XCR0 directly (libgcc's and clang's __builtin_cpu_supports do not name every feature
// below, F16C and MOVBE among them).
bool detect(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kScalar) return true;
  const CpuidRegisters leaf1 = cpuid(1, 0);
  const CpuidRegisters leaf7 = cpuid(7, 0);
  const CpuidRegisters extended = cpuid(0x80000001u, 0);
  // Everything x86-64-v3 lets the compiler use. Leaf 1 ECX: SSE3 0, SSSE3 9, FMA 12, CX16 13,
  // SSE4.1 19, SSE4.2 20, MOVBE 22, POPCNT 23, OSXSAVE 27, AVX 28, F16C 29.
  if (!all_bits(leaf1.ecx, {0, 9, 12, 13, 19, 20, 22, 23, 27, 28, 29})) return false;
  // Leaf 0x80000001 ECX: LAHF/SAHF 0, LZCNT 5 (a CPU without it runs LZCNT as BSR: wrong
  // results, not SIGILL, so it must be checked).
  if (!all_bits(extended.ecx, {0, 5})) return false;
  const unsigned long long xcr0 = os_saved_state();
  if ((xcr0 & 0x6u) != 0x6u) return false;  // SSE and AVX state
  // leaf 7 EBX: BMI1 3, AVX2 5, BMI2 8.
  if (!all_bits(leaf7.ebx, {3, 5, 8})) return false;
  if (isa == Isa::kAvx2) return true;
  // leaf 7 EBX: AVX512F 16, AVX512DQ 17, AVX512CD 28, AVX512BW 30, AVX512VL 31; XCR0: the opmask
  // and both halves of the ZMM state.
  return all_bits(leaf7.ebx, {16, 17, 28, 30, 31}) && (xcr0 & 0xE0u) == 0xE0u;
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
