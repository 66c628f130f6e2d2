// XXH3-64 (seed 0, the default secret) written so that a GPU can run it: the long-input loop is
// split into its eight accumulator lanes, each of which a thread can run on its own, and a final
// merge. One source for the GPU kernels (src/gpu/hash_kernels.cu) and a host build that CPU CI
// holds to libxxhash's XXH3_64bits for every input length path
// (tests/unit/state/xxh3_lanes_test.cpp), so a block hashed on the device has the hash
// block_hash.hpp defines.
//
// The production CPU path stays libxxhash (block_hash.cpp): it is vectorised, and this host build
// reads every word twice (each lane also adds its neighbour's word). Only integer arithmetic, and
// the inputs are read little-endian byte by byte where they may be unaligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LH_XXH3_FN __host__ __device__ __forceinline__
#else
#define LH_XXH3_FN [[gnu::always_inline]] inline
#endif

namespace longhaul::state::xxh3 {

inline constexpr std::uint64_t kPrime32_1 = 0x9E3779B1u;
inline constexpr std::uint64_t kPrime32_2 = 0x85EBCA77u;
inline constexpr std::uint64_t kPrime32_3 = 0xC2B2AE3Du;
inline constexpr std::uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull;
inline constexpr std::uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4Full;
inline constexpr std::uint64_t kPrime64_3 = 0x165667B19E3779F9ull;
inline constexpr std::uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ull;
inline constexpr std::uint64_t kPrime64_5 = 0x27D4EB2F165667C5ull;

inline constexpr std::size_t kSecretBytes = 192;
inline constexpr std::size_t kStripe = 64;                         // bytes per accumulation
inline constexpr std::size_t kStripesPerRound = 16;                // (secret − stripe) / 8
inline constexpr std::size_t kRound = kStripe * kStripesPerRound;  // bytes between scrambles
inline constexpr std::size_t kLongAbove = 240;  // longer inputs take the lane loop

// The default secret (XXH3's kSecret), as the byte list both tables below are made of.
#define LH_XXH3_SECRET                                                                            \
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, \
      0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67,   \
      0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff,   \
      0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81,   \
      0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b,   \
      0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef,   \
      0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc,   \
      0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8,   \
      0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3,   \
      0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda,   \
      0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47,   \
      0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95,   \
      0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

// The device reads the secret from constant memory, the host from an ordinary table.
#if defined(__CUDACC__)
static __constant__ std::uint8_t kSecretOnDevice[kSecretBytes] = {LH_XXH3_SECRET};
#endif
inline constexpr std::uint8_t kSecretOnHost[kSecretBytes] = {LH_XXH3_SECRET};

LH_XXH3_FN std::uint64_t read64(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  // One 8-byte load where the address allows it (every stripe of a block that starts aligned).
  if ((reinterpret_cast<std::uintptr_t>(p) & 7u) == 0)
    return *reinterpret_cast<const std::uint64_t*>(p);
#endif
  std::uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian on x86 and on the GPU
  return v;
}
LH_XXH3_FN std::uint32_t read32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

LH_XXH3_FN const std::uint8_t* secret() {
#if defined(__CUDA_ARCH__)
  return kSecretOnDevice;
#else
  return kSecretOnHost;
#endif
}
LH_XXH3_FN std::uint64_t secret64(std::size_t offset) {
  return read64(secret() + offset);
}
LH_XXH3_FN std::uint32_t secret32(std::size_t offset) {
  return read32(secret() + offset);
}

LH_XXH3_FN std::uint64_t rotl64(std::uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
LH_XXH3_FN std::uint64_t swap64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  const auto lo = static_cast<std::uint32_t>(x), hi = static_cast<std::uint32_t>(x >> 32);
  return (static_cast<std::uint64_t>(__byte_perm(lo, 0, 0x0123)) << 32) |
         __byte_perm(hi, 0, 0x0123);
#else
  return __builtin_bswap64(x);
#endif
}
// The 128-bit product of a and b, its halves xor-ed.
LH_XXH3_FN std::uint64_t mul128_fold64(std::uint64_t a, std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  __extension__ using u128 = unsigned __int128;  // GCC's and Clang's; -Wpedantic asks
  const u128 p = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
#endif
}

LH_XXH3_FN std::uint64_t xxh64_avalanche(std::uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}
LH_XXH3_FN std::uint64_t avalanche(std::uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  return h ^ (h >> 32);
}
LH_XXH3_FN std::uint64_t rrmxmx(std::uint64_t h, std::uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= 0x9FB21C651E98DF25ull;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ull;
  return h ^ (h >> 28);
}
LH_XXH3_FN std::uint64_t mix16(const std::uint8_t* in, std::size_t secret_at) {
  return mul128_fold64(read64(in) ^ secret64(secret_at), read64(in + 8) ^ secret64(secret_at + 8));
}

// Inputs of 0 to 16 bytes.
LH_XXH3_FN std::uint64_t hash_short(const std::uint8_t* in, std::size_t len) {
  if (len > 8) {
    const std::uint64_t lo = read64(in) ^ (secret64(24) ^ secret64(32));
    const std::uint64_t hi = read64(in + len - 8) ^ (secret64(40) ^ secret64(48));
    return avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
  }
  if (len >= 4) {
    const std::uint64_t joined =
        read32(in + len - 4) + (static_cast<std::uint64_t>(read32(in)) << 32);
    return rrmxmx(joined ^ (secret64(8) ^ secret64(16)), len);
  }
  if (len > 0) {
    const std::uint32_t combined = (static_cast<std::uint32_t>(in[0]) << 16) |
                                   (static_cast<std::uint32_t>(in[len >> 1]) << 24) |
                                   static_cast<std::uint32_t>(in[len - 1]) |
                                   (static_cast<std::uint32_t>(len) << 8);
    return xxh64_avalanche(combined ^ static_cast<std::uint64_t>(secret32(0) ^ secret32(4)));
  }
  return xxh64_avalanche(secret64(56) ^ secret64(64));
}

// Inputs of 17 to 240 bytes: 16-byte pairs from both ends (to 128), then a run of 16-byte mixes.
LH_XXH3_FN std::uint64_t hash_medium(const std::uint8_t* in, std::size_t len) {
  std::uint64_t acc = len * kPrime64_1;
  if (len <= 128) {
    const std::size_t pairs = (len - 1) / 32;  // 0..3: how many inner pairs beside the outer one
    for (std::size_t k = pairs + 1; k-- > 0;) {
      acc += mix16(in + 16 * k, 32 * k);
      acc += mix16(in + len - 16 * (k + 1), 32 * k + 16);
    }
    return avalanche(acc);
  }
  for (std::size_t i = 0; i < 8; ++i) acc += mix16(in + 16 * i, 16 * i);
  acc = avalanche(acc);
  for (std::size_t i = 8; i < len / 16; ++i) acc += mix16(in + 16 * i, 16 * (i - 8) + 3);
  acc += mix16(in + len - 16, 136 - 17);
  return avalanche(acc);
}

// The starting value of accumulator lane j (0..7).
LH_XXH3_FN std::uint64_t lane_start(unsigned j) {
  switch (j) {
    case 0:
      return kPrime32_3;
    case 1:
      return kPrime64_1;
    case 2:
      return kPrime64_2;
    case 3:
      return kPrime64_3;
    case 4:
      return kPrime64_4;
    case 5:
      return kPrime32_2;
    case 6:
      return kPrime64_5;
    default:
      return kPrime32_1;
  }
}

// Lane j's share of accumulating one stripe with the secret at `secret_at`: the lane's own word
// keyed and multiplied, plus the neighbouring lane's word (XXH3 swaps adjacent lanes' data).
LH_XXH3_FN std::uint64_t accumulate(std::uint64_t acc, unsigned j, const std::uint8_t* stripe,
                                    std::size_t secret_at) {
  const std::uint64_t own = read64(stripe + 8 * j);
  const std::uint64_t keyed = own ^ secret64(secret_at + 8 * j);
  return acc + read64(stripe + 8 * (j ^ 1u)) + (keyed & 0xFFFFFFFFu) * (keyed >> 32);
}

LH_XXH3_FN std::uint64_t scramble(std::uint64_t acc, unsigned j) {
  acc ^= acc >> 47;
  acc ^= secret64(kSecretBytes - kStripe + 8 * j);
  return acc * kPrime32_1;
}

// Accumulator lane j after the whole of an input longer than 240 bytes: full rounds of 16
// stripes each followed by a scramble, the stripes of the last partial round, and the input's
// last 64 bytes with the secret offset by 7.
LH_XXH3_FN std::uint64_t long_lane(const std::uint8_t* in, std::size_t len, unsigned j) {
  std::uint64_t acc = lane_start(j);
  const std::size_t rounds = (len - 1) / kRound;
  for (std::size_t r = 0; r < rounds; ++r) {
    const std::uint8_t* round = in + r * kRound;
    for (std::size_t s = 0; s < kStripesPerRound; ++s)
      acc = accumulate(acc, j, round + s * kStripe, 8 * s);
    acc = scramble(acc, j);
  }
  const std::uint8_t* tail = in + rounds * kRound;
  const std::size_t stripes = ((len - 1) - rounds * kRound) / kStripe;
  for (std::size_t s = 0; s < stripes; ++s) acc = accumulate(acc, j, tail + s * kStripe, 8 * s);
  return accumulate(acc, j, in + len - kStripe, kSecretBytes - kStripe - 7);
}

// The hash of an input longer than 240 bytes from its eight lanes.
LH_XXH3_FN std::uint64_t merge_lanes(const std::uint64_t (&acc)[8], std::size_t len) {
  std::uint64_t h = len * kPrime64_1;
  for (unsigned i = 0; i < 4; ++i)
    h += mul128_fold64(acc[2 * i] ^ secret64(11 + 16 * i),
                       acc[2 * i + 1] ^ secret64(11 + 16 * i + 8));
  return avalanche(h);
}

// XXH3_64bits(in, len): the whole hash on one thread.
LH_XXH3_FN std::uint64_t hash(const std::uint8_t* in, std::size_t len) {
  if (len <= 16) return hash_short(in, len);
  if (len <= kLongAbove) return hash_medium(in, len);
  std::uint64_t acc[8];
  for (unsigned j = 0; j < 8; ++j) acc[j] = long_lane(in, len, j);
  return merge_lanes(acc, len);
}

}  // namespace longhaul::state::xxh3
