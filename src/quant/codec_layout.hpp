// The encoded layout of the blockwise codecs (codec.hpp), shared by the kernels (codec.cpp) and
// the size and header queries (codec_layout.cpp): a U8/U4 block is a header (lo, then scale, two
// little-endian f32) followed by its codes, one byte (U8) or one nibble (U4) per element.
#pragma once

#include <cstddef>
#include <cstring>

#include "common/status.hpp"
#include "quant/codec.hpp"
#include "quant/isa_namespace.hpp"

namespace longhaul::quant::layout {
inline namespace LH_QUANT_ISA_NS {

inline constexpr std::size_t kHeaderBytes = 2 * sizeof(float);

constexpr bool is_blockwise(Codec c) {
  return c == Codec::kU8 || c == Codec::kU4 || c == Codec::kE3M0;
}
// The code bytes of n elements of a U8/U4 block.
constexpr std::size_t payload_bytes(Codec c, std::size_t n) {
  return c == Codec::kU8 ? n : (n + 1) / 2;
}

// Force-inlined: they run once per block inside the kernels' unrolled loops.
[[gnu::always_inline]] inline void write_header(std::byte* p, float lo, float scale) {
  std::memcpy(p, &lo, sizeof(float));
  std::memcpy(p + sizeof(float), &scale, sizeof(float));
}
[[gnu::always_inline]] inline BlockHeader read_header(const std::byte* p) {
  float lo;
  float scale;
  std::memcpy(&lo, p, sizeof(float));
  std::memcpy(&scale, p + sizeof(float), sizeof(float));
  return {lo, scale};  // aggregate initialisation: no constructor of BlockHeader to emit
}

}  // namespace LH_QUANT_ISA_NS

// OK when `bytes` is the encoded size of `count` elements (LH_ERR_INVALID_ARGUMENT naming `fn`
// otherwise).
Status check_sizes(std::size_t count, std::size_t bytes, Codec codec, std::size_t block,
                   const char* fn);

}  // namespace longhaul::quant::layout
