// The E3M0 codec's loops (Codec::kE3M0, codec.hpp): a 4-bit float, sign and 3 exponent bits, with
// one f32 scale per block. Internal to lh_quant: compiled once per ISA (isa_namespace.hpp) and
// reached through the kernel table (kernels.hpp), whose entry points check the arguments and pin
// the FP environment (fp_env.hpp). The scalar build's loops are the normative definition
// (docs/quantization.md); the AVX-512 build computes the same bytes another way.
//
// Format of a block of n elements: [f32 A][(n + 1) / 2 bytes of codes], A = max |x| over the
// block, element 2j in the low nibble of byte j. Code c = s << 3 | e: e = 0 is +0, e = 1..7 is
// (-1)^s * A * 2^(e - 7). Each |x| goes to the nearest level in linear value, a value on a
// midpoint to the larger one. A block with a NaN or +-Inf: A = the quiet NaN 0x7FC00000, codes 0,
// and it decodes to that NaN everywhere.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/isa_namespace.hpp"
#include "quant/sink.hpp"

namespace longhaul::quant::e3m0 {

inline constexpr std::size_t kHeaderBytes = sizeof(float);

inline namespace LH_QUANT_ISA_NS {
// Encoded bytes of a block of n elements.
constexpr std::size_t block_bytes(std::size_t n) {
  return kHeaderBytes + (n + 1) / 2;
}
}  // namespace LH_QUANT_ISA_NS

// Encoded bytes of `count` elements in blocks of `block` (block >= 1). Built once
// (codec_layout.cpp).
std::size_t encoded_size(std::size_t count, std::size_t block);

// The header A of block `index` (all blocks before it are full). Built once (codec_layout.cpp).
float block_scale(const std::byte* encoded, std::size_t block, std::size_t index);

inline namespace LH_QUANT_ISA_NS {

// Every function below requires: block in [1, kMaxBlock]; `out`/`in` of encoded_size(count,
// block) bytes; no overlap between buffers; count >= 1; the default FP environment.

void encode(const float* x, std::size_t count, std::byte* out, std::size_t block);

// o[i] = (kStore), o[i] += (kAdd) or o[i] -= (kResidual, then 0 where not finite) the decoded
// value of element i.
void decode(const std::byte* in, std::size_t count, float* o, std::size_t block, Sink sink);

// residual = v - decode(encode(v)), v = x + residual, with encode(v) written to out; a residual
// that is not finite becomes 0 (codec.hpp's encode_with_error_feedback).
void encode_with_error_feedback(const float* x, float* residual, std::size_t count, std::byte* out,
                                std::size_t block);

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant::e3m0
