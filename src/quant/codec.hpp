// Quantization codecs of the all-reduce: f32 values in, bytes on the wire, f32 values out.
//
// Codecs apply to f32 tensors only. Tensors of any other dtype travel as their own bytes
// (Codec::kNone) and are combined with reduce.hpp.
//
//   kNone  4 bytes/element: the f32 bytes themselves (little-endian).
//   kFp16  2 bytes/element: IEEE binary16, round to nearest even; |x| >= 65520 becomes +-Inf.
//   kBf16  2 bytes/element: bfloat16, round to nearest even.
//   kU8    min-max blockwise, 8 bits/element; per block of `block` elements a header.
//   kU4    min-max blockwise, 4 bits/element, two per byte; per block a header.
//   kE3M0  4-bit float (sign, 3 exponent bits, no mantissa) with an f32 scale per block; below.
//
// Blockwise format (kU8, kU4). The elements are cut into blocks of `block` (the last one may be
// shorter). Each block is stored as
//   [f32 lo][f32 scale][codes]
// with lo = the block's minimum, scale = (max - lo) / L where L = 255 (u8) or 15 (u4), and codes
// q_i = min(round_half_even((x_i - lo) * inv), L) with inv = L / (max - lo) (one division per
// block; never a division per element) as 1 byte (u8) or a nibble (u4: element
// 2j in the low nibble of byte j, 2j+1 in the high nibble; an odd last element leaves the high
// nibble 0). Decoding is x_i' = lo + q_i * scale, so |x_i - x_i'| <= scale / 2 plus a few f32
// rounding errors. The header is f32 (8 bytes per block) rather than f16: f16 cannot hold
// gradients beyond 65504, and an f16/bf16-rounded lo or scale would shift every element of the
// block by up to 2^-11 (2^-8 for bf16) of its magnitude, which for u8 is the size of the
// quantization step itself. At the default block of 128 the header costs 0.0625 bytes/element.
//
// Degenerate blocks, all deterministic:
//   - all elements equal (or a range so small that 1/scale overflows f32): scale is stored as 0,
//     codes 0, and every element decodes to lo;
//   - any NaN or +-Inf in the block: lo and scale are stored as the quiet NaN 0x7FC00000, codes 0,
//     and the whole block decodes to NaN (NaN in, NaN out: the trainer's non-finite check sees
//     it);
//   - a range wider than FLT_MAX (max - min overflows f32, so lo + q * scale cannot span it):
//     stored and decoded like a NaN block.
//
// Determinism: the encoder uses two divisions per block (scale and inv) and per element only
// subtraction, multiplication, comparison and the exact 1.5 * 2^23 rounding trick,
// all single IEEE operations (no FMA: -ffp-contract=off; no -ffast-math), under the default FP
// environment (fp_env.hpp). The minimum and maximum are found on integer keys that order floats
// totally (-0 < +0), so they too are order-independent. Hence the same input bytes give the same
// encoded bytes on every machine and at every vector width. The format is little-endian.
//
// E3M0 (Streaming DiLoCo's 4-bit pseudo-gradients; docs/quantization.md is the normative text).
// Each block is stored as [f32 A][codes], A = max |x| over the block, codes two per byte as u4.
// A code is s << 3 | e: e = 0 is +0 (s = 0), e = 1..7 is (-1)^s * A * 2^(e - 7), the levels A/64,
// A/32, ..., A/2, A. |x| rounds to the nearest level in linear value, a midpoint (A/128 between 0
// and A/64, 1.5 * A * 2^(e - 8) above) to the larger one; the comparisons are exact integer
// compares against thresholds rounded up to f32 (e3m0.cpp says why that is exact). Decoding
// multiplies A by 2^(e - 7) in f32 (exact unless subnormal). A = 0 (zeros of either sign): codes 0,
// decodes to +0. A NaN or +-Inf in the block: A is stored as the quiet NaN 0x7FC00000, codes 0,
// and the block decodes to that NaN. Per element |x - x'| <= |x| / 3 where |x| >= A/64, and
// <= A/128 below (plus half a subnormal ulp when the level is subnormal).
//
// Buffers: `out` of encode must be exactly encoded_size(in.size(), codec, block) bytes; `in` of
// decode exactly encoded_size(out.size(), codec, block). Input and output must not overlap.
// Errors (LH_ERR_INVALID_ARGUMENT): an unknown codec value, block outside [1, kMaxBlock] (only
// checked for kU8/kU4/kE3M0, where it matters), a size mismatch. On error nothing is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.hpp"

namespace longhaul::quant {

enum class Codec : std::uint8_t { kNone = 0, kFp16 = 1, kBf16 = 2, kU8 = 3, kU4 = 4, kE3M0 = 5 };
inline constexpr int kNumCodecs = 6;

// Default elements per block of kU8/kU4/kE3M0, and the largest block accepted.
inline constexpr std::size_t kDefaultBlock = 128;
inline constexpr std::size_t kMaxBlock = std::size_t{1} << 30;

std::string_view codec_name(Codec codec);  // "none", "fp16", "bf16", "u8", "u4", "e3m0"

// Bytes that encode() writes for `count` f32 elements.
Result<std::size_t> encoded_size(std::size_t count, Codec codec, std::size_t block = kDefaultBlock);

// out = encoding of in.
Status encode(std::span<const float> in, std::span<std::byte> out, Codec codec,
              std::size_t block = kDefaultBlock);

// encode() through the scalar build of the kernels (common/cpu_isa.hpp), whatever the selected
// ISA: the portable loops, the reference every other build is held to. Same bytes by design.
Status encode_portable(std::span<const float> in, std::span<std::byte> out, Codec codec,
                       std::size_t block = kDefaultBlock);

// out = decoding of in.
Status decode(std::span<const std::byte> in, std::span<float> out, Codec codec,
              std::size_t block = kDefaultBlock);

// acc[i] += decoded element i, in one pass (the receive side of the quantized reduce-scatter).
Status decode_accumulate(std::span<const std::byte> in, std::span<float> acc, Codec codec,
                         std::size_t block = kDefaultBlock);

// Error feedback: encodes v = in + residual into out, then sets residual = v - decode(out), so the
// rounding error of this call is added to the next call's input instead of being lost. A residual
// element that comes out non-finite (a NaN/Inf block) is reset to 0, so one bad step does not
// poison every later call. residual.size() must equal in.size(); before the first call it should
// hold zeros. in, residual and out must not overlap. Runs block by block (one pass over memory).
Status encode_with_error_feedback(std::span<const float> in, std::span<float> residual,
                                  std::span<std::byte> out, Codec codec,
                                  std::size_t block = kDefaultBlock);

// The header of block `index` of an encoding of `count` elements with kU8/kU4/kE3M0 (for tests
// and diagnostics). kU8/kU4: lo and scale as stored; the per-element error bound is scale / 2.
// kE3M0: scale is the block's A (the largest level), lo is 0 (not stored).
struct BlockHeader {
  float lo = 0;
  float scale = 0;
};
Result<BlockHeader> read_block_header(std::span<const std::byte> encoded, std::size_t count,
                                      Codec codec, std::size_t block, std::size_t index);

}  // namespace longhaul::quant
