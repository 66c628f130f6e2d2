// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw ("Parallel random
// numbers: as easy as 1, 2, 3", SC'11), with the constants of Random123, cuRAND and JAX: a
// 128-bit counter and a 64-bit key give 128 random bits through ten rounds of two 32x32->64
// multiplications. It is a bijection of the counter for a fixed key, needs no state, and any
// block is computed without the others: what lets every peer regenerate any slice of any other
// peer's perturbation (perturbation.hpp).
//
// This is the scalar reference: constexpr, so the published Known Answer Tests are also checked at
// compile time (tests/unit/rng/philox_test.cpp), and the vector forms of philox_simd.hpp are held
// to it word for word.
#pragma once

#include <cstdint>

#include "rng/isa_namespace.hpp"

namespace longhaul::rng {
inline namespace LH_RNG_ISA_NS {

inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;  // multiplier of counter word 0
inline constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;  // multiplier of counter word 2
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;  // key bump, word 0 (golden ratio)
inline constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;  // key bump, word 1 (sqrt(3) - 1)
inline constexpr int kPhiloxRounds = 10;

struct PhiloxBlock {
  std::uint32_t w[4];
};

struct PhiloxKey {
  std::uint32_t k[2];
};

// One round (Random123's _philox4x32round): two multiplications, their halves swapped and mixed
// with the other two words and the round key.
[[gnu::always_inline]] constexpr PhiloxBlock philox_round(PhiloxBlock c, PhiloxKey key) {
  const std::uint64_t p0 = static_cast<std::uint64_t>(kPhiloxM0) * c.w[0];
  const std::uint64_t p1 = static_cast<std::uint64_t>(kPhiloxM1) * c.w[2];
  const auto lo0 = static_cast<std::uint32_t>(p0), hi0 = static_cast<std::uint32_t>(p0 >> 32);
  const auto lo1 = static_cast<std::uint32_t>(p1), hi1 = static_cast<std::uint32_t>(p1 >> 32);
  return {{hi1 ^ c.w[1] ^ key.k[0], lo1, hi0 ^ c.w[3] ^ key.k[1], lo0}};
}

// Philox4x32-10 of `counter` under `key`: round, then bump the key by the Weyl constants before
// each of the nine following rounds.
[[gnu::always_inline]] constexpr PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key) {
  counter = philox_round(counter, key);
  for (int r = 1; r < kPhiloxRounds; ++r) {
    key.k[0] += kPhiloxW0;
    key.k[1] += kPhiloxW1;
    counter = philox_round(counter, key);
  }
  return counter;
}

}  // namespace LH_RNG_ISA_NS
}  // namespace longhaul::rng
