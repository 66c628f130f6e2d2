// The host build of state/xxh3_lanes.hpp (the source the GPU's block-hash kernel runs) against
// libxxhash's XXH3_64bits: every length through the short, medium and long paths and across
// the boundaries of the long loop's rounds, at every alignment, and lane by lane the same as the
// one-thread hash.
#include "state/xxh3_lanes.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <vector>

#include "state/block_hash.hpp"

namespace longhaul::state {
namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

TEST(Xxh3Lanes, EveryLengthToThreeRoundsIsLibxxhashsHash) {
  const auto data = random_bytes(3 * xxh3::kRound + 200, 1);
  for (std::size_t len = 0; len <= data.size(); ++len)
    ASSERT_EQ(xxh3::hash(data.data(), len), XXH3_64bits(data.data(), len)) << "length " << len;
}

TEST(Xxh3Lanes, EveryAlignmentIsTheSame) {
  const auto data = random_bytes(4096 + 16, 2);
  for (std::size_t offset = 0; offset < 16; ++offset)
    for (std::size_t len : {1u, 3u, 4u, 8u, 9u, 16u, 17u, 128u, 129u, 240u, 241u, 1025u, 4096u})
      ASSERT_EQ(xxh3::hash(data.data() + offset, len), XXH3_64bits(data.data() + offset, len))
          << "offset " << offset << ", length " << len;
}

TEST(Xxh3Lanes, WholeBlocksAndTheirNeighboursAreLibxxhashsHash) {
  const auto data = random_bytes(kBlockBytes + 4096, 3);
  for (std::size_t len :
       {std::size_t{65536}, std::size_t{kBlockBytes} - 1, std::size_t{kBlockBytes},
        std::size_t{kBlockBytes} + 1, std::size_t{kBlockBytes} + 4095})
    EXPECT_EQ(xxh3::hash(data.data(), len), XXH3_64bits(data.data(), len)) << "length " << len;
  std::mt19937_64 rng(4);
  for (int i = 0; i < 20; ++i) {
    const std::size_t len = rng() % data.size();
    EXPECT_EQ(xxh3::hash(data.data(), len), XXH3_64bits(data.data(), len)) << "length " << len;
  }
}

TEST(Xxh3Lanes, InputsOfOneValueAndOfZerosToo) {
  for (std::uint8_t fill : {std::uint8_t{0}, std::uint8_t{0xFF}, std::uint8_t{0x80}}) {
    const std::vector<std::uint8_t> data(2 * xxh3::kRound + 65, fill);
    for (std::size_t len : {0u, 5u, 16u, 100u, 200u, 1000u, 2113u})
      EXPECT_EQ(xxh3::hash(data.data(), len), XXH3_64bits(data.data(), len))
          << "fill " << int{fill} << ", length " << len;
  }
}

}  // namespace
}  // namespace longhaul::state
