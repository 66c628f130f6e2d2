// The sparse codec's encoder (sparse_codec.hpp): error feedback, top-k selection, 2-bit levels and
// the bit packing of sparse_format.hpp. Scalar C++ whose hot loops (totals, keys, counts) the
// compiler vectorizes; every result is an integer compare or one IEEE operation, so no ISA or
// vector width can change a bit.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/fp_env.hpp"
#include "quant/sparse_codec.hpp"
#include "quant/sparse_format.hpp"

namespace longhaul::quant::sparse {

using namespace format;

namespace {

constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu;
constexpr std::uint32_t kExpMask = 0x7F800000u;

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}
bool finite(float x) {
  return (bits(x) & kExpMask) != kExpMask;
}

// The first element whose total is not finite, named with the reason; OK when there is none. The
// totals are computed as in the encoder: a NaN or Inf in either input makes the total non-finite
// (0 * Inf is NaN), so one vectorizable test per element covers all three cases.
Status check_finite(std::span<const float> in, std::span<const float> residual, float decay) {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float t = in[i] + decay * residual[i];
    bad |= static_cast<std::uint32_t>((bits(t) & kExpMask) == kExpMask);
  }
  if (bad == 0) return Status::ok();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!finite(in[i]))
      return invalid_argument(fmt::format("sparse encode: input[{}] is {}", i, in[i]));
    if (!finite(residual[i]))
      return invalid_argument(fmt::format("sparse encode: residual[{}] is {}", i, residual[i]));
    const float t = in[i] + decay * residual[i];
    if (!finite(t)) {
      return invalid_argument(fmt::format(
          "sparse encode: element {}: input {} + decayed residual overflows", i, in[i]));
    }
  }
  return internal_error("sparse encode: non-finite total not found again");
}

// Per-call work space, one chunk long.
struct Scratch {
  explicit Scratch(std::size_t chunk)
      : coarse(chunk), flag(chunk + 8), candidate(chunk), few(chunk) {}
  // The high half of the bits of |total| (its bf16 truncation), ordered like the magnitudes: half
  // the bytes of the whole key, so a counting pass reads 8 KiB per 4096 elements, 8 lanes a vector.
  std::vector<std::int16_t> coarse;
  std::vector<std::uint8_t> flag;        // gather()'s 0/1 per element, padded to 8 bytes
  std::vector<std::uint32_t> candidate;  // indices that survive the search, increasing
  std::vector<std::uint32_t> few;        // their whole keys, reordered by the selection
};

std::uint32_t key_of(float t) {
  return bits(t) & kAbsMask;
}

// A 16-bit count: len <= kMaxChunk = 65535, and 16-bit lanes keep 8 elements to a vector.
std::uint32_t count_at_least(const std::int16_t* coarse, std::uint32_t len, std::int16_t floor) {
  std::uint16_t c = 0;
  for (std::uint32_t i = 0; i < len; ++i) c = static_cast<std::uint16_t>(c + (coarse[i] >= floor));
  return c;
}

// The indices i with coarse[i] >= lo, increasing, into index; returns how many. A vectorized pass
// writes a 0/1 byte per element; eight bytes are then tested at once and, where one is set (about
// 2k of len are), their positions read off with count-trailing-zeros.
std::uint32_t gather(const std::int16_t* coarse, std::uint32_t len, std::int16_t lo,
                     std::uint8_t* flag, std::uint32_t* index) {
  for (std::uint32_t i = 0; i < len; ++i) flag[i] = static_cast<std::uint8_t>(coarse[i] >= lo);
  const std::uint32_t words = (len + 7) / 8;
  for (std::uint32_t i = len; i < words * 8; ++i) flag[i] = 0;
  std::uint32_t n = 0;
  for (std::uint32_t w = 0; w < words; ++w) {
    std::uint64_t set;
    std::memcpy(&set, flag + 8 * w, sizeof(set));
    if constexpr (std::endian::native == std::endian::big) set = __builtin_bswap64(set);
    while (set != 0) {  // byte j of the word is bits 8j..8j+7
      index[n++] = 8 * w + static_cast<std::uint32_t>(std::countr_zero(set)) / 8;
      set &= set - 1;
    }
  }
  return n;
}

// Which elements a chunk sends: among the candidates (increasing indices), every whole key above
// `key`, then the first `equal` whose key is exactly `key`. With `key` the k-th largest key, that
// is the top k by (magnitude, then lower index), whatever order the search visits values in.
struct Cut {
  std::uint32_t key = 0;
  std::uint32_t equal = 0;
  std::uint32_t sent = 0;
  std::uint32_t candidates = 0;  // indices in Scratch::candidate
};

// The cut for the top k among the totals whose key is >= floor (> 0). Narrows the coarse keys
// [lo, hi) by counting passes until at most 2k remain at or above lo (only lo = floor's coarse key
// can hold keys below floor; they are dropped on the whole keys), then finds the k-th largest of
// those few exactly. Every candidate not gathered has a smaller key than every one gathered.
Cut find_cut(const float* total, std::uint32_t len, std::uint32_t floor, std::int16_t max_coarse,
             std::uint32_t k, Scratch& s) {
  const std::int16_t* coarse = s.coarse.data();
  auto lo = static_cast<std::int16_t>(floor >> 16);
  std::uint32_t above_lo = count_at_least(coarse, len, lo);
  int hi = max_coarse + 1;  // count_at_least(hi) < k throughout
  while (above_lo > 2 * k && hi - lo > 1) {
    const auto mid = static_cast<std::int16_t>(lo + (hi - lo) / 2);
    const std::uint32_t c = count_at_least(coarse, len, mid);
    if (c >= k) {
      lo = mid;
      above_lo = c;
    } else {
      hi = mid;
    }
  }
  std::uint32_t* index = s.candidate.data();
  const std::uint32_t gathered = gather(coarse, len, lo, s.flag.data(), index);
  std::uint32_t* few = s.few.data();
  std::uint32_t n = 0;
  for (std::uint32_t j = 0; j < gathered; ++j) {
    const std::uint32_t key = key_of(total[index[j]]);
    index[n] = index[j];
    few[n] = key;
    n += static_cast<std::uint32_t>(key >= floor);
  }
  if (n <= k) return {0, 0, n, n};  // every candidate is sent (their keys are > 0)
  // The k-th largest of the n > k survivors (a value: the same whichever equal key lands there).
  std::nth_element(few, few + (k - 1), few + n, [](auto a, auto b) { return a > b; });
  const std::uint32_t t = few[k - 1];
  std::uint32_t greater = 0;
  for (std::uint32_t j = 0; j < n; ++j) greater += static_cast<std::uint32_t>(few[j] > t);
  return {t, k - greater, k, n};
}

// Encodes one chunk of len elements at out and updates its residual; returns the bytes written.
std::size_t encode_chunk(const float* in, float* residual, std::uint32_t len, float decay,
                         std::uint32_t k, std::uint32_t ibits, std::byte* out, Scratch& s) {
  // The totals go straight into the residual: an unsent element keeps its total, a sent one is
  // patched below. One pass, and the residual's cache lines are read and written once.
  std::int16_t max_coarse = 0;
  for (std::uint32_t i = 0; i < len; ++i) {
    const float t = in[i] + decay * residual[i];
    residual[i] = t;
    s.coarse[i] = static_cast<std::int16_t>(key_of(t) >> 16);
    max_coarse = std::max(max_coarse, s.coarse[i]);
  }
  // S = max |t| truncated to bf16, so S <= max |t| < 2S and S/2, S/4, 3S/4 are exact in f32.
  const auto scale_bits = static_cast<std::uint16_t>(max_coarse);
  const float scale = scale_value(scale_bits);
  if (scale_bits == 0) {
    put_u16(out, 0);
    put_u16(out + 2, 0);
    return kRecordHeaderBytes;
  }
  const float quarter = scale * 0.25f;
  const std::uint32_t big = bits(scale - quarter);  // |t| >= 3S/4 is sent as S, below as S/2
  const Cut cut = find_cut(residual, len, bits(quarter), max_coarse, k, s);
  put_u16(out, scale_bits);
  put_u16(out + 2, static_cast<std::uint16_t>(cut.sent));
  BitWriter writer(out + kRecordHeaderBytes);
  std::uint32_t equal_left = cut.equal;
  for (std::uint32_t j = 0; j < cut.candidates; ++j) {
    const std::uint32_t i = s.candidate[j];
    const std::uint32_t key = key_of(residual[i]);
    if (key < cut.key) continue;
    if (key == cut.key) {
      if (equal_left == 0) continue;
      --equal_left;
    }
    const float t = residual[i];
    const std::uint32_t code = static_cast<std::uint32_t>(key >= big) | ((bits(t) >> 31) << 1);
    // Exact (Sterbenz): the level has t's sign and lies in [|t|/2, 2|t|]: S for |t| in
    // [3S/4, 2S), S/2 for |t| in [S/4, 3S/4).
    residual[i] = t - level(scale, code);
    writer.put(i | (code << ibits), ibits + kCodeBits);
  }
  writer.finish();
  return kRecordHeaderBytes + entry_bytes(cut.sent, ibits + kCodeBits);
}

void write_header(std::byte* out, std::uint64_t count, std::uint32_t chunk, std::uint32_t k) {
  std::memcpy(out, kMagic.data(), kMagic.size());
  out[kOffVersion] = static_cast<std::byte>(kFormatVersion);
  out[kOffIndexBits] = static_cast<std::byte>(index_bits(chunk));
  put_u16(out + kOffReserved, 0);
  put_u32(out + kOffChunk, chunk);
  put_u32(out + kOffTopk, k);
  put_u64(out + kOffCount, count);
}

}  // namespace

Status check_params(const Params& params) {
  if (params.chunk == 0 || params.chunk > kMaxChunk) {
    return invalid_argument(
        fmt::format("sparse codec: chunk {} outside [1, {}]", params.chunk, kMaxChunk));
  }
  if (params.topk == 0) return invalid_argument("sparse codec: topk must be at least 1");
  if (!finite(params.decay) || params.decay < 0.0f || params.decay > 1.0f) {
    return invalid_argument(
        fmt::format("sparse codec: decay {} outside [0, 1]", static_cast<double>(params.decay)));
  }
  return Status::ok();
}

Result<std::size_t> max_encoded_size(std::size_t count, const Params& params) {
  LH_RETURN_IF_ERROR(check_params(params));
  const std::uint32_t width = index_bits(params.chunk) + kCodeBits;
  const std::size_t k = std::min(params.topk, params.chunk);
  const std::size_t full = count / params.chunk;
  const std::size_t tail = count % params.chunk;
  std::size_t bytes = kHeaderBytes + full * (kRecordHeaderBytes + entry_bytes(k, width));
  if (tail != 0) bytes += kRecordHeaderBytes + entry_bytes(std::min(k, tail), width);
  return bytes;
}

Result<std::size_t> encode_with_error_feedback(std::span<const float> in, std::span<float> residual,
                                               std::span<std::byte> out, const Params& params) {
  Result<std::size_t> max_bytes = max_encoded_size(in.size(), params);
  if (!max_bytes) return max_bytes.status();
  if (residual.size() != in.size()) {
    return invalid_argument(fmt::format("sparse encode: residual has {} elements, input {}",
                                        residual.size(), in.size()));
  }
  if (out.size() < *max_bytes) {
    return invalid_argument(
        fmt::format("sparse encode: output of {} bytes, {} needed", out.size(), *max_bytes));
  }
  ScopedDefaultFpEnv fp_env;
  LH_RETURN_IF_ERROR(check_finite(in, residual, params.decay));
  const auto chunk = static_cast<std::uint32_t>(params.chunk);
  const auto k = static_cast<std::uint32_t>(std::min(params.topk, params.chunk));
  write_header(out.data(), in.size(), chunk, k);
  Scratch scratch(params.chunk);
  std::size_t pos = kHeaderBytes;
  for (std::size_t base = 0; base < in.size(); base += chunk) {
    const auto len = static_cast<std::uint32_t>(std::min<std::size_t>(chunk, in.size() - base));
    pos += encode_chunk(in.data() + base, residual.data() + base, len, params.decay, k,
                        index_bits(chunk), out.data() + pos, scratch);
  }
  return pos;
}

}  // namespace longhaul::quant::sparse
