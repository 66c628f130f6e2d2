// Philox4x32-10 (src/rng/philox.hpp, philox_simd.hpp): the Known Answer Tests published with
// Random123, on the constexpr reference and on every ISA build this CPU runs, and every build's
// words held to the reference over random keys, counters and block counts.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "isa_scope.hpp"
#include "rng/kernels.hpp"
#include "rng/perturbation.hpp"
#include "rng/philox.hpp"

namespace longhaul::rng {
namespace {

struct KnownAnswer {
  PhiloxBlock counter;
  PhiloxKey key;
  PhiloxBlock expected;
};

// Random123 1.14, tests/kat_vectors, the three "philox4x32 10" lines (counter, key, result).
constexpr KnownAnswer kKnownAnswers[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     {{0x00000000, 0x00000000}},
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

constexpr bool equal(PhiloxBlock a, PhiloxBlock b) {
  return a.w[0] == b.w[0] && a.w[1] == b.w[1] && a.w[2] == b.w[2] && a.w[3] == b.w[3];
}

// The reference is checked by the compiler too.
static_assert(equal(philox4x32_10(kKnownAnswers[0].counter, kKnownAnswers[0].key),
                    kKnownAnswers[0].expected));
static_assert(equal(philox4x32_10(kKnownAnswers[2].counter, kKnownAnswers[2].key),
                    kKnownAnswers[2].expected));

PhiloxStream stream_of(PhiloxBlock counter, PhiloxKey key) {
  PhiloxStream s;
  s.key[0] = key.k[0];
  s.key[1] = key.k[1];
  for (int w = 0; w < 3; ++w) s.counter_high[w] = counter.w[w + 1];
  return s;
}

TEST(Philox, ReferenceGivesRandom123KnownAnswers) {
  for (const KnownAnswer& kat : kKnownAnswers) {
    const PhiloxBlock r = philox4x32_10(kat.counter, kat.key);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(r.w[w], kat.expected.w[w]) << "word " << w;
  }
}

TEST(Philox, RefusesWordsThatAreNotWholeBlocks) {
  std::vector<std::uint32_t> out(6);
  const Status s = philox_words(PhiloxStream{}, 0, out);
  EXPECT_EQ(s.code(), LH_ERR_INVALID_ARGUMENT);
}

class PhiloxIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(PhiloxIsa, GivesRandom123KnownAnswers) {
  LH_SKIP_UNLESS_CPU_RUNS(GetParam());
  IsaScope scope(GetParam());
  ASSERT_TRUE(scope.ok());
  for (const KnownAnswer& kat : kKnownAnswers) {
    std::uint32_t out[4] = {};
    ASSERT_TRUE(philox_words(stream_of(kat.counter, kat.key), kat.counter.w[0], out).is_ok());
    for (int w = 0; w < 4; ++w) EXPECT_EQ(out[w], kat.expected.w[w]) << "word " << w;
  }
}

// Random streams, first blocks (some wrapping past 2^32 - 1) and counts around the batch of 16.
TEST_P(PhiloxIsa, WordsEqualTheReferenceOverRandomStreams) {
  LH_SKIP_UNLESS_CPU_RUNS(GetParam());
  const RngEntries& kernels = rng_kernels_for(GetParam());
  std::mt19937_64 rng(52);
  for (const std::size_t count : {1, 7, 8, 15, 16, 17, 31, 100}) {
    for (int trial = 0; trial < 20; ++trial) {
      PhiloxStream s;
      s.key[0] = static_cast<std::uint32_t>(rng());
      s.key[1] = static_cast<std::uint32_t>(rng());
      for (auto& w : s.counter_high) w = static_cast<std::uint32_t>(rng());
      const auto first = trial == 0 ? 0xFFFFFFF8u : static_cast<std::uint32_t>(rng());
      std::vector<std::uint32_t> out(4 * count);
      kernels.philox_words(s, first, count, out.data());
      for (std::size_t b = 0; b < count; ++b) {
        const PhiloxBlock ref =
            philox4x32_10({{first + static_cast<std::uint32_t>(b), s.counter_high[0],
                            s.counter_high[1], s.counter_high[2]}},
                          {{s.key[0], s.key[1]}});
        for (int w = 0; w < 4; ++w)
          ASSERT_EQ(out[4 * b + w], ref.w[w]) << "block " << b << " word " << w;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Philox, PhiloxIsa, ::testing::ValuesIn(kAllIsas), isa_param_name);

}  // namespace
}  // namespace longhaul::rng
