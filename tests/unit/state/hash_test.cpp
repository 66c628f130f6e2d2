// The hashing scheme is part of the protocol: pin its definition, and check the parallel block
// hashing against a plain loop. (parallel_for itself is tested in tests/unit/runtime.)
#include "state/block_hash.hpp"

#include <gtest/gtest.h>

#include <xxhash.h>
#include <random>

#include "runtime/worker_pool.hpp"

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
  runtime::WorkerPool workers;
  const auto hashes = hash_blocks(data, workers);
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
  runtime::WorkerPool workers(4);  // more threads than this machine may have cores: still equal
  const auto parallel = hash_blocks(data, workers);
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

}  // namespace
}  // namespace longhaul::state
