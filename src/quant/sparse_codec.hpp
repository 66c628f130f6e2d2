// The sparse codec (issue 48, part 1): per chunk of `chunk` f32 elements, the top-k by magnitude,
// each sent as a 2-bit level of one per-chunk scale with its index in the chunk, bit-packed, with
// error feedback. docs/quantization.md ("Sparse top-k codec") is the normative wire format; this
// header states what each call does and what it promises.
//
// In short: one contribution is [24-byte header][one record per chunk]. A record is
// [u16 scale as bf16][u16 n][n entries of (index_bits + 2) bits, LSB first, padded to a byte].
// index_bits = bit width of (chunk - 1): 12 at chunk 4096. An entry is index | code << index_bits.
// Codes, with S the chunk's scale: 0 = +S/2, 1 = +S, 2 = -S/2, 3 = -S.
//
// Encoding a chunk (t = the totals below): S = max |t| over the chunk with its f32 bits truncated
// to bf16 (so S <= max |t| < S * (1 + 2^-7)); the candidates are the elements with |t| >= S/4; of
// them the k largest |t| are sent (ties: the lower index first), |t| >= 3S/4 as S and the others as
// S/2, with the sign of t. A value below S/4 is never sent: a 2-bit level would be at least twice
// it; it stays whole in the residual, which is why a chunk may send fewer than k.
//
// Error feedback (SparseLoCo: e <- beta * e + delta, send Q(TopK(e)), e <- e - sent):
//   total[i]    = in[i] + (decay * residual[i])      two f32 roundings, in this order
//   residual[i] = total[i] - sent[i]                 where sent[i] is the decoded value, or 0
// Every sent value is within a factor 2 of its total with the same sign (see the rounding above),
// so by Sterbenz's lemma the subtraction is exact: sent[i] + residual[i] == total[i] bit for bit in
// f32 (for unsent elements residual[i] = total[i]). Nothing a peer computed is lost, only delayed.
//
// Determinism: selection compares the bit patterns of |t| as integers and breaks ties by index;
// every float result is one IEEE operation under the default FP environment (fp_env.hpp). The same
// input gives the same bytes on every machine; the code is scalar C++ (no per-ISA kernels).
//
// Errors: caller mistakes (bad parameters, sizes, NaN/Inf in the input or residual, a total that
// overflows) are LH_ERR_INVALID_ARGUMENT; a malformed encoding given to a decoder is
// LH_ERR_PROTOCOL, with a message naming the field, the chunk and the value. On error nothing is
// written to any output or to the residual.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.hpp"

namespace longhaul::quant::sparse {

inline constexpr std::size_t kDefaultChunk = 4096;
inline constexpr std::size_t kDefaultTopk = 64;
// The decay of the residual before the new pseudo-gradient is added (SparseLoCo's error-feedback
// beta; docs/quantization.md says where the value comes from).
inline constexpr float kDefaultDecay = 0.95f;
// A record counts its entries in 16 bits, so a chunk holds at most 65535 elements.
inline constexpr std::size_t kMaxChunk = 65535;
inline constexpr std::size_t kHeaderBytes = 24;
inline constexpr std::size_t kRecordHeaderBytes = 4;
inline constexpr std::uint8_t kFormatVersion = 1;

struct Params {
  std::size_t chunk = kDefaultChunk;  // elements per chunk, [1, kMaxChunk]; the last may be short
  std::size_t topk = kDefaultTopk;    // entries per chunk at most, >= 1; >= chunk: every candidate
  float decay = kDefaultDecay;        // residual decay, finite, in [0, 1]
};

// What the header of an encoding says (read_header).
struct Header {
  std::uint64_t count = 0;  // f32 elements encoded
  std::uint32_t chunk = 0;
  std::uint32_t topk = 0;
  std::uint32_t index_bits = 0;
};

// Bits of an index for chunks of `chunk` elements: the bit width of chunk - 1 (12 for 4096, 0 for
// a chunk of 1, 16 for 65535).
std::uint32_t index_bits(std::size_t chunk);

// OK when params are valid (the ranges above); otherwise LH_ERR_INVALID_ARGUMENT naming the field.
Status check_params(const Params& params);

// The most bytes encode_with_error_feedback can write for `count` elements: the header and every
// chunk sending min(topk, its length) entries. Requires valid params (else an error).
Result<std::size_t> max_encoded_size(std::size_t count, const Params& params);

// Encodes `in` with error feedback into out and returns the bytes written (<= max_encoded_size).
// residual.size() == in.size(); it holds zeros before the first call and is owned by the caller
// (part of a checkpoint). out.size() >= max_encoded_size(in.size(), params). Refused, with nothing
// written: invalid params, a size mismatch, any NaN or +-Inf in `in` or `residual`, or a total that
// overflows to +-Inf (the message names the first such element). in, residual and out must not
// overlap.
Result<std::size_t> encode_with_error_feedback(std::span<const float> in, std::span<float> residual,
                                               std::span<std::byte> out, const Params& params);

// Reads and checks the header of an encoding (magic, version, chunk, topk, index bits, reserved
// bytes). Does not look at the records.
Result<Header> read_header(std::span<const std::byte> in);

// Checks the whole encoding: header, every record (scale a finite non-negative bf16, zero when the
// record is empty; n <= min(topk, chunk length); indices strictly increasing and inside the chunk;
// padding bits zero) and that the records end exactly at the end of the buffer.
Status validate(std::span<const std::byte> in);

// out = the decoded values: the level of each sent element, +0 elsewhere. out.size() must equal the
// header's count. The buffer is validated first; on error out is untouched.
Status decode(std::span<const std::byte> in, std::span<float> out);

// acc[i] += the decoded value of each sent element, in increasing index order, one f32 addition
// each; unsent elements are not touched. Summing several contributions in one fixed order (e.g. by
// member) gives the same bits on every peer. Validated first; on error acc is untouched.
Status decode_accumulate(std::span<const std::byte> in, std::span<float> acc);

}  // namespace longhaul::quant::sparse
