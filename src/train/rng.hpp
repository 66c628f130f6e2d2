// A small deterministic random generator (SplitMix64). The standard library's distributions are
// implementation-defined, so initialisation and batch sampling use this instead: the same seed
// gives the same model and the same batches on every platform.
#pragma once

#include <cmath>
#include <cstdint>

namespace longhaul::train {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next_u64() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (n > 0); the modulo bias is below 2^-40 for the sizes used here.
  std::uint64_t below(std::uint64_t n) { return next_u64() % n; }
  // Uniform in (0, 1], 53 random bits.
  double unit() { return (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53; }
  // Standard normal by Box-Muller (one value per call; simple beats fast here).
  double normal() {
    const double u1 = unit(), u2 = unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  std::uint64_t state() const { return state_; }

 private:
  std::uint64_t state_;
};

// Mixes several values into one seed, so that (seed, step) pairs give unrelated streams.
inline std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  Rng r(a ^ (b * 0xD1B54A32D192ED03ull));
  r.next_u64();
  return r.next_u64();
}

}  // namespace longhaul::train
