// Pins the floating-point environment that bit-determinism relies on for the duration of a kernel.
//
// Every float operation in src/quant is a single IEEE 754 operation (no FMA contraction: the
// project builds with -ffp-contract=off; no -ffast-math), so its result is the same on every
// machine and at every vector width, *provided* the thread runs in the default environment:
// round-to-nearest-even and subnormals neither flushed (FTZ) nor treated as zero (DAZ). Callers
// such as PyTorch (torch.set_flush_denormal) may change that per thread, so each public entry
// point holds a ScopedDefaultFpEnv, which sets the default control bits if they differ and puts
// the caller's back on exit. Cost: two reads of MXCSR per call (per chunk, not per element).
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#else
#include <cfenv>
#endif

namespace longhaul::quant {

class ScopedDefaultFpEnv {
 public:
#if defined(__x86_64__) || defined(_M_X64)
  ScopedDefaultFpEnv() : saved_(_mm_getcsr()) {
    // Bits 0-5 are exception flags; the rest are control bits. 0x1F80 = all exceptions masked,
    // round to nearest, FTZ and DAZ off: the power-on default.
    constexpr unsigned kDefaultControl = 0x1F80u;
    if ((saved_ & ~0x3Fu) != kDefaultControl) {
      changed_ = true;
      _mm_setcsr(kDefaultControl | (saved_ & 0x3Fu));
    }
  }
  ~ScopedDefaultFpEnv() {
    if (changed_) _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
  bool changed_ = false;
#else
  ScopedDefaultFpEnv() : saved_(std::fegetround()) {
    if (saved_ != FE_TONEAREST) std::fesetround(FE_TONEAREST);
  }
  ~ScopedDefaultFpEnv() {
    if (saved_ != FE_TONEAREST) std::fesetround(saved_);
  }

 private:
  int saved_;
#endif

 public:
  ScopedDefaultFpEnv(const ScopedDefaultFpEnv&) = delete;
  ScopedDefaultFpEnv& operator=(const ScopedDefaultFpEnv&) = delete;
};

}  // namespace longhaul::quant
