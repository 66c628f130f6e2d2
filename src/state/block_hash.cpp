#include "state/block_hash.hpp"

#include <algorithm>

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
  std::vector<std::byte> buf;
  buf.reserve(8 + 8 * block_hashes.size());
  put_le(buf, bytes, 8);
  for (uint64_t h : block_hashes) put_le(buf, h, 8);
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
