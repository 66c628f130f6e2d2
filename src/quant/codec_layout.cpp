// The codecs' names, encoded sizes and block headers (codec.hpp): what the encoded format looks
// like, apart from the kernels that write and read it (codec.cpp).
#include "quant/codec_layout.hpp"

#include <cstring>

#include <fmt/format.h>

#include "quant/e3m0.hpp"

namespace longhaul::quant {

namespace layout {

Status check_sizes(std::size_t count, std::size_t bytes, Codec codec, std::size_t block,
                   const char* fn) {
  Result<std::size_t> need = encoded_size(count, codec, block);
  if (!need) return need.status().with_context(fn);
  if (*need != bytes) {
    return invalid_argument(
        fmt::format("{}: {} elements with codec {} (block {}) need {} encoded "
                    "bytes, got {}",
                    fn, count, codec_name(codec), block, *need, bytes));
  }
  return Status::ok();
}

}  // namespace layout

namespace e3m0 {

std::size_t encoded_size(std::size_t count, std::size_t block) {
  const std::size_t rest = count % block;
  return count / block * block_bytes(block) + (rest != 0 ? block_bytes(rest) : 0);
}

float block_scale(const std::byte* encoded, std::size_t block, std::size_t index) {
  float a;
  std::memcpy(&a, encoded + index * block_bytes(block), sizeof a);
  return a;
}

}  // namespace e3m0

using layout::check_sizes;
using layout::is_blockwise;
using layout::kHeaderBytes;
using layout::payload_bytes;
using layout::read_header;

std::string_view codec_name(Codec codec) {
  switch (codec) {
    case Codec::kNone:
      return "none";
    case Codec::kFp16:
      return "fp16";
    case Codec::kBf16:
      return "bf16";
    case Codec::kU8:
      return "u8";
    case Codec::kU4:
      return "u4";
    case Codec::kE3M0:
      return "e3m0";
  }
  return "invalid";
}

Result<std::size_t> encoded_size(std::size_t count, Codec codec, std::size_t block) {
  switch (codec) {
    case Codec::kNone:
      return count * sizeof(float);
    case Codec::kFp16:
    case Codec::kBf16:
      return count * sizeof(std::uint16_t);
    case Codec::kU8:
    case Codec::kU4:
    case Codec::kE3M0: {
      if (block == 0 || block > kMaxBlock) {
        return invalid_argument(fmt::format("block size {} outside [1, {}]", block, kMaxBlock));
      }
      if (codec == Codec::kE3M0) return e3m0::encoded_size(count, block);
      const std::size_t full = count / block;
      const std::size_t rest = count % block;
      std::size_t bytes = full * (kHeaderBytes + payload_bytes(codec, block));
      if (rest != 0) bytes += kHeaderBytes + payload_bytes(codec, rest);
      return bytes;
    }
  }
  return invalid_argument(fmt::format("invalid codec value {}", static_cast<int>(codec)));
}

Result<BlockHeader> read_block_header(std::span<const std::byte> encoded, std::size_t count,
                                      Codec codec, std::size_t block, std::size_t index) {
  if (!is_blockwise(codec)) {
    return invalid_argument(fmt::format("codec {} has no block headers", codec_name(codec)));
  }
  LH_RETURN_IF_ERROR(check_sizes(count, encoded.size(), codec, block, "read_block_header"));
  if (index >= (count + block - 1) / block) {
    return invalid_argument(fmt::format("block {} out of range for {} elements", index, count));
  }
  // Every block before `index` is full.
  if (codec == Codec::kE3M0)
    return BlockHeader{0.0f, e3m0::block_scale(encoded.data(), block, index)};
  return read_header(encoded.data() + index * (kHeaderBytes + payload_bytes(codec, block)));
}

}  // namespace longhaul::quant
