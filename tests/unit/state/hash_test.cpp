// The hashing scheme is part of the protocol: pin its definition, and check the parallel block
// hashing against a plain loop.
#include "state/block_hash.hpp"

#include <gtest/gtest.h>

#include <xxhash.h>
#include <random>

#include "state/parallel.hpp"

namespace longhaul::state {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

TEST(BlockHash, BlocksAreOneMiBAndTheLastMayBeShort) {
  EXPECT_EQ(kBlockBytes, 1u << 20);
  EXPECT_EQ(block_count(0), 0u);
  EXPECT_EQ(block_count(1), 1u);
  EXPECT_EQ(block_count(kBlockBytes), 1u);
  EXPECT_EQ(block_count(kBlockBytes + 1), 2u);
  EXPECT_EQ(block_length(kBlockBytes + 5, 1), 5u);
  EXPECT_EQ(block_length(3 * uint64_t{kBlockBytes}, 2), kBlockBytes);
}

TEST(BlockHash, DefinitionIsXxh3OfBlocksThenOfSizeAndBlockHashes) {
  const auto data = random_bytes(2 * kBlockBytes + 777, 1);
  const auto hashes = hash_blocks(data);
  ASSERT_EQ(hashes.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(hashes[i], XXH3_64bits(data.data() + i * kBlockBytes, block_length(data.size(), i)));
  std::vector<uint64_t> le = {data.size(), hashes[0], hashes[1],
                              hashes[2]};  // x86-64 is little-endian
  EXPECT_EQ(tensor_hash(data.size(), hashes), XXH3_64bits(le.data(), le.size() * 8));
  // An empty tensor still has a hash: that of its size alone.
  const uint64_t zero = 0;
  EXPECT_EQ(tensor_hash(0, {}), XXH3_64bits(&zero, 8));
}

TEST(BlockHash, ParallelHashingEqualsAPlainLoop) {
  const auto data = random_bytes(37 * kBlockBytes / 2, 2);
  const auto parallel = hash_blocks(data);
  for (size_t i = 0; i < parallel.size(); ++i)
    EXPECT_EQ(parallel[i],
              hash_block(std::span(data).subspan(block_offset(i), block_length(data.size(), i))));
}

TEST(BlockHash, StateHashCoversNamesTypesSizesAndContent) {
  std::vector<TensorSummary> s = {{"a", 0, 10, 111}, {"b", 8, 1, 222}};
  const uint64_t h = state_hash(s);
  auto changed = [&](auto edit) {
    auto t = s;
    edit(t);
    return state_hash(t) != h;
  };
  EXPECT_TRUE(changed([](auto& t) { t[0].name = "c"; }));
  EXPECT_TRUE(changed([](auto& t) { t[1].dtype = 9; }));
  EXPECT_TRUE(changed([](auto& t) { t[0].count = 11; }));
  EXPECT_TRUE(changed([](auto& t) { t[1].hash = 223; }));
  EXPECT_FALSE(changed([](auto&) {}));
}

TEST(Parallel, RunsEveryIndexOnceEvenWhenNested) {
  std::vector<std::atomic<int>> hits(1000);
  parallel_for(hits.size(), [&](size_t i) {
    hits[i].fetch_add(1);
    if (i % 100 == 0) parallel_for(10, [](size_t) {});  // nested loops must not deadlock
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_GE(parallelism(), 1u);
}

}  // namespace
}  // namespace longhaul::state
