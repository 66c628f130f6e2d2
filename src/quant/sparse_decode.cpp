// The sparse codec's reading side (sparse_codec.hpp): header, validation, decode. One parser walks
// the records; validation runs it with a visitor that does nothing, decoding with one that stores
// or adds, so the checks are written once and a buffer is fully checked before anything is written.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "quant/fp_env.hpp"
#include "quant/sparse_codec.hpp"
#include "quant/sparse_format.hpp"

namespace longhaul::quant::sparse {

using namespace format;

namespace {

// Walks every record of a buffer whose header is h, calling visit(element, value) for each entry in
// increasing element order. Returns the first violation of the format, naming it.
template <class Visit>
Status walk_records(std::span<const std::byte> in, const Header& h, Visit&& visit) {
  const std::uint64_t chunks = h.count / h.chunk + (h.count % h.chunk != 0 ? 1 : 0);
  std::size_t pos = kHeaderBytes;
  // Every record has at least its 4-byte head, so a count the buffer cannot hold is refused before
  // walking (a forged count of 2^64 - 1 must not loop for ages).
  if (chunks > (in.size() - kHeaderBytes) / kRecordHeaderBytes) {
    return protocol_error(
        fmt::format("sparse codec: {} chunks cannot fit in {} bytes", chunks, in.size()));
  }
  const std::uint32_t width = h.index_bits + kCodeBits;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint64_t base = c * h.chunk;
    const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(h.chunk, h.count - base));
    if (in.size() - pos < kRecordHeaderBytes)
      return protocol_error(fmt::format("sparse codec: chunk {}: record head truncated", c));
    const auto scale_bits = static_cast<std::uint16_t>(get_le(in.data() + pos, 2));
    const auto n = static_cast<std::uint32_t>(get_le(in.data() + pos + 2, 2));
    pos += kRecordHeaderBytes;
    if ((scale_bits & 0x8000u) != 0 || (scale_bits & 0x7F80u) == 0x7F80u) {
      return protocol_error(fmt::format(
          "sparse codec: chunk {}: scale 0x{:04x} is negative or not finite", c, scale_bits));
    }
    if (n > std::min(h.topk, len)) {
      return protocol_error(
          fmt::format("sparse codec: chunk {}: {} entries, more than min(topk {}, "
                      "length {})",
                      c, n, h.topk, len));
    }
    if ((n == 0) != (scale_bits == 0)) {
      return protocol_error(
          fmt::format("sparse codec: chunk {}: {} entries with scale 0x{:04x} (zero iff empty)", c,
                      n, scale_bits));
    }
    const std::size_t bytes = entry_bytes(n, width);
    if (in.size() - pos < bytes) {
      return protocol_error(fmt::format("sparse codec: chunk {}: {} entry bytes, {} left", c, bytes,
                                        in.size() - pos));
    }
    const std::byte* entries = in.data() + pos;
    const float s = scale_value(scale_bits);
    std::int64_t previous = -1;
    for (std::uint32_t j = 0; j < n; ++j) {
      const std::uint32_t e = get_bits(entries, std::size_t{j} * width, width);
      const std::uint32_t index = e & ((std::uint32_t{1} << h.index_bits) - 1);
      if (index >= len) {
        return protocol_error(
            fmt::format("sparse codec: chunk {}: index {} outside its {} elements", c, index, len));
      }
      if (static_cast<std::int64_t>(index) <= previous) {
        return protocol_error(fmt::format(
            "sparse codec: chunk {}: index {} after {} (indices must strictly increase)", c, index,
            previous));
      }
      previous = index;
      visit(base + index, level(s, e >> h.index_bits));
    }
    const std::size_t used = std::size_t{n} * width;
    if (used % 8 != 0 && get_bits(entries, used, static_cast<std::uint32_t>(8 - used % 8)) != 0)
      return protocol_error(fmt::format("sparse codec: chunk {}: padding bits are not zero", c));
    pos += bytes;
  }
  if (pos != in.size()) {
    return protocol_error(
        fmt::format("sparse codec: {} bytes after the last record", in.size() - pos));
  }
  return Status::ok();
}

// The header, checked against the output's size, after a first walk has checked every record: the
// writing walk that follows cannot fail half way.
Result<Header> checked_header(std::span<const std::byte> in, std::size_t out_count,
                              const char* what) {
  Result<Header> h = read_header(in);
  if (!h) return h.status();
  if (h->count != out_count) {
    return invalid_argument(fmt::format("sparse {}: the encoding holds {} elements, the output {}",
                                        what, h->count, out_count));
  }
  LH_RETURN_IF_ERROR(walk_records(in, *h, [](std::uint64_t, float) {}));
  return h;
}

}  // namespace

std::uint32_t index_bits(std::size_t chunk) {
  return chunk <= 1 ? 0u : static_cast<std::uint32_t>(std::bit_width(chunk - 1));
}

Result<Header> read_header(std::span<const std::byte> in) {
  if (in.size() < kHeaderBytes) {
    return protocol_error(fmt::format("sparse codec: {} bytes, shorter than the {}-byte header",
                                      in.size(), kHeaderBytes));
  }
  const std::byte* p = in.data();
  for (std::size_t i = 0; i < kMagic.size(); ++i) {
    if (std::to_integer<std::uint8_t>(p[i]) != kMagic[i])
      return protocol_error("sparse codec: bad magic (not an LHSP encoding)");
  }
  const auto version = std::to_integer<std::uint8_t>(p[kOffVersion]);
  if (version != kFormatVersion)
    return protocol_error(fmt::format("sparse codec: unknown format version {}", version));
  if (get_le(p + kOffReserved, 2) != 0)
    return protocol_error("sparse codec: reserved header bytes are not zero");
  Header h;
  h.chunk = static_cast<std::uint32_t>(get_le(p + kOffChunk, 4));
  h.topk = static_cast<std::uint32_t>(get_le(p + kOffTopk, 4));
  h.count = get_le(p + kOffCount, 8);
  h.index_bits = std::to_integer<std::uint8_t>(p[kOffIndexBits]);
  if (h.chunk == 0 || h.chunk > kMaxChunk)
    return protocol_error(
        fmt::format("sparse codec: chunk {} outside [1, {}]", h.chunk, kMaxChunk));
  if (h.topk == 0 || h.topk > h.chunk) {
    return protocol_error(
        fmt::format("sparse codec: topk {} outside [1, chunk {}]", h.topk, h.chunk));
  }
  if (h.index_bits != index_bits(h.chunk)) {
    return protocol_error(fmt::format("sparse codec: index bits {} for chunk {}, expected {}",
                                      h.index_bits, h.chunk, index_bits(h.chunk)));
  }
  return h;
}

Status validate(std::span<const std::byte> in) {
  Result<Header> h = read_header(in);
  if (!h) return h.status();
  return walk_records(in, *h, [](std::uint64_t, float) {});
}

Status decode(std::span<const std::byte> in, std::span<float> out) {
  ScopedDefaultFpEnv fp_env;
  Result<Header> h = checked_header(in, out.size(), "decode");
  if (!h) return h.status();
  std::fill(out.begin(), out.end(), 0.0f);
  return walk_records(in, *h, [&](std::uint64_t i, float v) { out[i] = v; });
}

Status decode_accumulate(std::span<const std::byte> in, std::span<float> acc) {
  ScopedDefaultFpEnv fp_env;
  Result<Header> h = checked_header(in, acc.size(), "decode_accumulate");
  if (!h) return h.status();
  return walk_records(in, *h, [&](std::uint64_t i, float v) { acc[i] += v; });
}

}  // namespace longhaul::quant::sparse
