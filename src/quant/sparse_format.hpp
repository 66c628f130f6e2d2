// The byte layout of the sparse codec (sparse_codec.hpp; docs/quantization.md is normative), shared
// by its encoder (sparse_codec.cpp) and decoder (sparse_decode.cpp) so the layout is written once.
// Internal to lh_quant.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace longhaul::quant::sparse::format {

inline constexpr std::array<std::uint8_t, 4> kMagic = {'L', 'H', 'S', 'P'};
// Header offsets (little-endian fields).
inline constexpr std::size_t kOffVersion = 4;
inline constexpr std::size_t kOffIndexBits = 5;
inline constexpr std::size_t kOffReserved = 6;  // u16, zero
inline constexpr std::size_t kOffChunk = 8;     // u32
inline constexpr std::size_t kOffTopk = 12;     // u32, in [1, chunk]
inline constexpr std::size_t kOffCount = 16;    // u64
inline constexpr std::uint32_t kCodeBits = 2;

// Bytes of a record's entries: n entries of `width` bits, padded to a whole byte.
constexpr std::size_t entry_bytes(std::size_t n, std::uint32_t width) {
  return (n * width + 7) / 8;
}

// The f32 value of a bf16 scale (its 16 bits are the f32's high half).
inline float scale_value(std::uint16_t scale_bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(scale_bits) << 16);
}

// The value of code c at scale s: bit 0 picks S (1) or S/2 (0), bit 1 the sign (1 = negative).
// s * 0.5f is exact: a bf16 scale has 16 spare low bits, so halving never rounds, even subnormal.
inline float level(float s, std::uint32_t code) {
  const float magnitude = (code & 1u) != 0 ? s : s * 0.5f;
  return (code & 2u) != 0 ? -magnitude : magnitude;
}

inline void put_u16(std::byte* p, std::uint16_t v) {
  p[0] = static_cast<std::byte>(v & 0xFF);
  p[1] = static_cast<std::byte>(v >> 8);
}
inline void put_u32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}
inline void put_u64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}
inline std::uint64_t get_le(const std::byte* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::to_integer<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// Appends fields of up to 32 bits, least significant bit first, to a byte buffer the caller has
// sized (entry_bytes). finish() writes the last partial byte with zero padding.
class BitWriter {
 public:
  explicit BitWriter(std::byte* out) : out_(out) {}
  void put(std::uint32_t value, std::uint32_t width) {
    acc_ |= static_cast<std::uint64_t>(value) << filled_;
    filled_ += width;
    while (filled_ >= 8) {
      *out_++ = static_cast<std::byte>(acc_ & 0xFF);
      acc_ >>= 8;
      filled_ -= 8;
    }
  }
  void finish() {
    if (filled_ > 0) *out_++ = static_cast<std::byte>(acc_ & 0xFF);
    acc_ = 0;
    filled_ = 0;
  }

 private:
  std::byte* out_;
  std::uint64_t acc_ = 0;
  std::uint32_t filled_ = 0;
};

// Reads `width` (<= 32) bits starting at bit `pos` of p, touching only the bytes that hold them.
inline std::uint32_t get_bits(const std::byte* p, std::size_t pos, std::uint32_t width) {
  if (width == 0) return 0;
  const std::size_t first = pos / 8;
  const std::size_t last = (pos + width - 1) / 8;
  std::uint64_t v = 0;
  for (std::size_t j = first; j <= last; ++j)
    v |= std::to_integer<std::uint64_t>(p[j]) << (8 * (j - first));
  return static_cast<std::uint32_t>((v >> (pos % 8)) & ((std::uint64_t{1} << width) - 1));
}

}  // namespace longhaul::quant::sparse::format
