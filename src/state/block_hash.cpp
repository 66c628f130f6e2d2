#include "state/block_hash.hpp"

#include <algorithm>
#include <array>

#include <xxh_x86dispatch.h>
#include <xxhash.h>

#include "runtime/worker_pool.hpp"

namespace longhaul::state {
namespace {

// libxxhash's dispatching entry point picks the widest vector unit of the CPU at run time
// (SSE2/AVX2/AVX-512); the function computed is the same on every CPU.
uint64_t xxh3(const void* data, size_t len) {
  return XXH3_64bits_dispatch(data, len);
}

void put_le(std::vector<std::byte>& out, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

void put_le(std::span<std::byte, 8> out, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(v >> (8 * i));
}

}  // namespace

uint64_t hash_block(std::span<const std::byte> block) {
  return xxh3(block.data(), block.size());
}

std::vector<uint64_t> hash_blocks(std::span<const std::byte> data, runtime::WorkerPool& workers) {
  std::vector<uint64_t> out(block_count(data.size()));
  workers.parallel_for(out.size(), [&](size_t i) {
    out[i] = hash_block(data.subspan(block_offset(i), block_length(data.size(), i)));
  });
  return out;
}

uint64_t tensor_hash(uint64_t bytes, std::span<const uint64_t> block_hashes) {
  // The size, then every block hash, 8 bytes little-endian each. A tensor of a few blocks (most
  // of a report of many tensors) is hashed from the stack: no allocation per tensor.
  constexpr size_t kOnStack = 15;
  const size_t n = 8 * (block_hashes.size() + 1);
  std::array<std::byte, 8 * (kOnStack + 1)> small;
  std::vector<std::byte> large(block_hashes.size() > kOnStack ? n : 0);
  const std::span<std::byte> buf = large.empty() ? std::span(small.data(), n) : std::span(large);
  put_le(buf.first<8>(), bytes);
  for (size_t i = 0; i < block_hashes.size(); ++i)
    put_le(buf.subspan(8 * (i + 1)).first<8>(), block_hashes[i]);
  return xxh3(buf.data(), buf.size());
}

uint64_t state_hash(std::span<const TensorSummary> tensors) {
  std::vector<std::byte> buf;
  for (const auto& t : tensors) {
    put_le(buf, t.name.size(), 4);
    for (char c : t.name) buf.push_back(static_cast<std::byte>(c));
    put_le(buf, t.dtype, 1);
    put_le(buf, t.count, 8);
    put_le(buf, t.hash, 8);
  }
  return xxh3(buf.data(), buf.size());
}

}  // namespace longhaul::state
