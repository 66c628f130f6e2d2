// The GPU's block hashes (gpu/hash_device.hpp) against the CPU's (state/block_hash.hpp, libxxhash)
// on the same bytes: tensors whose last block takes every length path of XXH3, tensors that start
// unaligned, and a tensor of over a GiB. Skipped, with the reason, where there is no CUDA device.
#include "gpu/hash_device.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "state/block_hash.hpp"
#include "tests/unit/gpu/device_buffer.hpp"

namespace {

using longhaul::gpu::hash_blocks_on_device;
using longhaul::gpu::testing::DeviceBuffer;
namespace state = longhaul::state;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t r = rng();
    for (std::size_t k = 0; k < 8 && i + k < n; ++k)
      v[i + k] = static_cast<std::uint8_t>(r >> (8 * k));
  }
  return v;
}

std::vector<std::uint64_t> cpu_hashes(const std::uint8_t* data, std::size_t bytes) {
  std::vector<std::uint64_t> out(state::block_count(bytes));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = state::hash_block({reinterpret_cast<const std::byte*>(data) + state::block_offset(i),
                                state::block_length(bytes, i)});
  return out;
}

// The device's hashes of `bytes` bytes placed `offset` bytes into a device buffer.
void expect_same_hashes(std::size_t bytes, std::size_t offset, std::uint64_t seed) {
  const auto host = random_bytes(bytes + offset, seed);
  DeviceBuffer device(host.size());
  device.upload(host);
  std::vector<std::uint64_t> got(state::block_count(bytes));
  const auto* start = device.as<std::uint8_t>() + offset;
  ASSERT_TRUE(hash_blocks_on_device(start, bytes, got).is_ok());
  EXPECT_EQ(got, cpu_hashes(host.data() + offset, bytes)) << bytes << " bytes at offset " << offset;
}

TEST(GpuHash, TheLastBlockTakesEveryLengthPathOfXxh3) {
  LH_SKIP_WITHOUT_CUDA();
  const std::size_t mib = state::kBlockBytes;
  for (std::size_t tail :
       {0u, 1u, 3u, 4u, 8u, 9u, 16u, 17u, 32u, 33u, 128u, 129u, 240u, 241u, 1024u, 1025u, 65537u})
    for (std::size_t whole : {std::size_t{0}, std::size_t{3}}) {
      if (whole == 0 && tail == 0) continue;
      expect_same_hashes(whole * mib + tail, 0, tail + whole);
    }
}

TEST(GpuHash, UnalignedTensorsHashAsTheirBytes) {
  LH_SKIP_WITHOUT_CUDA();
  for (std::size_t offset : {1u, 3u, 4u, 7u})
    expect_same_hashes(2 * state::kBlockBytes + 777, offset, offset);
}

TEST(GpuHash, ATensorOfOverAGibHashesAsTheCpuDoes) {
  LH_SKIP_WITHOUT_CUDA();
  expect_same_hashes((std::size_t{1} << 30) + 12345, 0, 99);
}

TEST(GpuHash, BadArgumentsAreRefused) {
  LH_SKIP_WITHOUT_CUDA();
  DeviceBuffer device(4096);
  std::vector<std::uint64_t> out(2);
  EXPECT_EQ(hash_blocks_on_device(device.as<void>(), 4096, out).code(), LH_ERR_INVALID_ARGUMENT);
  std::vector<std::uint8_t> host(4096);
  out.resize(1);
  EXPECT_EQ(hash_blocks_on_device(host.data(), host.size(), out).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(hash_blocks_on_device(device.as<void>(), 0, std::span<std::uint64_t>{}).is_ok());
}

}  // namespace
