// The one hashing scheme of shared state (part of the protocol: every peer and the master compute
// exactly these functions).
//
//   block hash   XXH3-64 (seed 0) of one block: kBlockBytes of the tensor's bytes, the last block
//                of a tensor possibly shorter.
//   tensor hash  XXH3-64 (seed 0) of: u64 byte size, then every block hash, all little-endian.
//   state hash   XXH3-64 (seed 0) of, for every tensor in ascending name order: u32 name length,
//                the name, u8 dtype, u64 element count, u64 tensor hash (little-endian).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace longhaul::runtime {
class WorkerPool;
}

namespace longhaul::state {

// Bytes per block. 1 MiB: a one-block drift moves 1 MiB, a 256 MiB tensor reports 256 hashes
// (2 KiB), and each block is large enough for XXH3 to run at full speed.
inline constexpr uint32_t kBlockBytes = 1u << 20;

inline uint64_t block_count(uint64_t bytes) {
  return (bytes + kBlockBytes - 1) / kBlockBytes;
}
// The byte range of block `index` within a tensor of `bytes` bytes.
inline uint64_t block_offset(uint64_t index) {
  return index * kBlockBytes;
}
inline uint64_t block_length(uint64_t bytes, uint64_t index) {
  const uint64_t end = std::min<uint64_t>(bytes, (index + 1) * uint64_t{kBlockBytes});
  return end - index * uint64_t{kBlockBytes};
}

// Bit i of a bitmap stored LSB first (out of range: false).
inline bool bit(const std::vector<uint8_t>& bitmap, uint64_t i) {
  return i / 8 < bitmap.size() && ((bitmap[i / 8] >> (i % 8)) & 1) != 0;
}

uint64_t hash_block(std::span<const std::byte> block);
// The block hashes of `data`, computed in parallel over blocks on `workers` and the calling
// thread (which may be one of the workers).
std::vector<uint64_t> hash_blocks(std::span<const std::byte> data, runtime::WorkerPool& workers);
uint64_t tensor_hash(uint64_t bytes, std::span<const uint64_t> block_hashes);

struct TensorSummary {
  std::string name;
  uint8_t dtype = 0;
  uint64_t count = 0;
  uint64_t hash = 0;  // tensor_hash
};
// `tensors` in ascending name order.
uint64_t state_hash(std::span<const TensorSummary> tensors);

}  // namespace longhaul::state
