// The block-hash kernel: eight threads per block, one per XXH3 accumulator lane. Each runs its
// lane over the whole block (state/xxh3_lanes.hpp: long_lane), the eight lanes meet by warp
// shuffle, and the first merges them. Blocks of 240 bytes or less (only a tensor's last block can
// be one) are hashed by the first thread alone.
#include "gpu/hash_kernels.hpp"

#include "state/block_hash.hpp"
#include "state/xxh3_lanes.hpp"

namespace longhaul::gpu {
namespace {

namespace xxh3 = state::xxh3;

constexpr unsigned kLanes = 8;
// Small CTAs spread a tensor's few thousand threads over every SM (a 1 GiB tensor is 1024 blocks,
// 8192 threads).
constexpr unsigned kThreads = 64;

__global__ void hash_blocks_kernel(const std::uint8_t* data, std::size_t bytes,
                                   std::size_t blocks, std::uint64_t* out) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t block = t / kLanes;
  const unsigned lane = static_cast<unsigned>(t % kLanes);
  const bool active = block < blocks;
  const std::size_t first = active ? block * state::kBlockBytes : 0;
  const std::uint8_t* in = data + first;
  const std::size_t rest = bytes - first;  // block_length(), which is host code
  const std::size_t len = !active ? 0 : rest < state::kBlockBytes ? rest : state::kBlockBytes;
  const bool long_input = len > xxh3::kLongAbove;
  const std::uint64_t mine = long_input ? xxh3::long_lane(in, len, lane) : 0;
  // Every thread of the warp takes part in the shuffles, active or not.
  std::uint64_t acc[kLanes];
  for (unsigned i = 0; i < kLanes; ++i) acc[i] = __shfl_sync(0xFFFFFFFFu, mine, i, kLanes);
  if (!active || lane != 0) return;
  out[block] = long_input ? xxh3::merge_lanes(acc, len) : xxh3::hash(in, len);
}

}  // namespace

cudaError_t launch_hash_blocks(const std::uint8_t* data, std::size_t bytes, std::uint64_t* out,
                               cudaStream_t stream) {
  const std::size_t blocks = state::block_count(bytes);
  const auto ctas = static_cast<unsigned>((blocks * kLanes + kThreads - 1) / kThreads);
  hash_blocks_kernel<<<ctas, kThreads, 0, stream>>>(data, bytes, blocks, out);
  return cudaGetLastError();
}

}  // namespace longhaul::gpu
