// The block-hash kernel: one warp per block. XXH3's long loop has eight accumulator lanes, and
// between two scrambles (every 16 stripes, 1 KiB) a lane only adds terms, which commute modulo
// 2^64. So thread t of the warp takes lane t % 8 and every fourth stripe of a round from
// t / 8; two shuffles sum the four partial sums of each lane, and every thread of the lane
// scrambles the same total. The terms, the scramble and the merge are state/xxh3_lanes.hpp's, the
// source CPU CI holds to libxxhash; the order of the additions is the only difference from its
// long_lane, and addition modulo 2^64 does not see order. Blocks of 240 bytes or less (only a
// tensor's last block can be one) are hashed by the warp's first thread alone.
#include "gpu/hash_kernels.hpp"

#include "state/block_hash.hpp"
#include "state/xxh3_lanes.hpp"

namespace longhaul::gpu {
namespace {

namespace xxh3 = state::xxh3;

constexpr unsigned kFullWarp = 0xFFFFFFFFu;
constexpr unsigned kLanes = 8;
constexpr unsigned kStripeGroups = 32 / kLanes;  // threads sharing one lane
constexpr unsigned kWarpsPerCta = 4;

// The sum, over the warp's threads of lane `lane`, of their `part`.
__device__ std::uint64_t sum_over_lane(std::uint64_t part) {
  part += __shfl_xor_sync(kFullWarp, part, 8);
  return part + __shfl_xor_sync(kFullWarp, part, 16);
}

// This lane's terms of stripes group, group + 4, ... below `stripes` from `first`, summed.
__device__ std::uint64_t stripe_terms(const std::uint8_t* first, std::size_t stripes, unsigned lane,
                                      unsigned group) {
  std::uint64_t part = 0;
  for (std::size_t s = group; s < stripes; s += kStripeGroups)
    part = xxh3::accumulate(part, lane, first + s * xxh3::kStripe, 8 * s);
  return sum_over_lane(part);
}

// xxh3::long_lane(in, len, lane), computed by the four threads of the lane together.
__device__ std::uint64_t long_lane_of_warp(const std::uint8_t* in, std::size_t len, unsigned lane,
                                           unsigned group) {
  std::uint64_t acc = xxh3::lane_start(lane);
  const std::size_t rounds = (len - 1) / xxh3::kRound;
  for (std::size_t r = 0; r < rounds; ++r)
    acc = xxh3::scramble(acc + stripe_terms(in + r * xxh3::kRound, xxh3::kStripesPerRound, lane,
                                            group),
                         lane);
  const std::size_t tail_stripes = ((len - 1) - rounds * xxh3::kRound) / xxh3::kStripe;
  acc += stripe_terms(in + rounds * xxh3::kRound, tail_stripes, lane, group);
  return xxh3::accumulate(acc, lane, in + len - xxh3::kStripe,
                          xxh3::kSecretBytes - xxh3::kStripe - 7);
}

__global__ void hash_blocks_kernel(const std::uint8_t* data, std::size_t bytes,
                                   std::size_t blocks, std::uint64_t* out) {
  const std::size_t block = blockIdx.x * static_cast<std::size_t>(kWarpsPerCta) + threadIdx.x / 32;
  if (block >= blocks) return;  // the whole warp: the shuffles below stay warp-uniform
  const unsigned thread = threadIdx.x % 32, lane = thread % kLanes, group = thread / kLanes;
  const std::size_t first = block * state::kBlockBytes;
  const std::size_t rest = bytes - first;  // block_length(), which is host code
  const std::size_t len = rest < state::kBlockBytes ? rest : state::kBlockBytes;
  const std::uint8_t* in = data + first;
  if (len <= xxh3::kLongAbove) {
    if (thread == 0) out[block] = xxh3::hash(in, len);
    return;
  }
  const std::uint64_t mine = long_lane_of_warp(in, len, lane, group);
  std::uint64_t acc[kLanes];
  for (unsigned i = 0; i < kLanes; ++i) acc[i] = __shfl_sync(kFullWarp, mine, i);
  if (thread == 0) out[block] = xxh3::merge_lanes(acc, len);
}

}  // namespace

cudaError_t launch_hash_blocks(const std::uint8_t* data, std::size_t bytes, std::uint64_t* out,
                               cudaStream_t stream) {
  const std::size_t blocks = state::block_count(bytes);
  const auto ctas = static_cast<unsigned>((blocks + kWarpsPerCta - 1) / kWarpsPerCta);
  hash_blocks_kernel<<<ctas, 32 * kWarpsPerCta, 0, stream>>>(data, bytes, blocks, out);
  return cudaGetLastError();
}

}  // namespace longhaul::gpu
