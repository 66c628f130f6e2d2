// Encoders and decoders of codec.hpp, compiled once per ISA (kernels.hpp). Each codec is a loop
// over blocks with a tight inner loop over the block's elements; every inner loop is branch-free
// (selects only) and auto-vectorizes at -O2/-O3 without -ffast-math (see docs/quantization.md for
// the -fopt-info-vec evidence). The AVX-512 build replaces some of them with codec_avx512.hpp's.
#include "quant/codec.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cstring>
#include <type_traits>

#include "quant/block_codec.hpp"
#include "quant/codec_avx512.hpp"
#include "quant/codec_layout.hpp"
#include "quant/e3m0.hpp"
#include "quant/half.hpp"
#include "quant/kernels.hpp"
#include "quant/sink.hpp"

namespace longhaul::quant {
inline namespace LH_QUANT_ISA_NS {

static_assert(std::endian::native == std::endian::little,
              "the encoded format is little-endian; a big-endian port must byte-swap");

namespace {

// The encoded layout: headers, payload sizes, size checks (codec_layout.hpp).
using namespace layout;

// The per-block arithmetic is block_codec.hpp's, shared with the GPU kernels.
using block::key_to_float;
using block::kKeyNegInf;
using block::kKeyPosInf;
using block::kQuietNan;
using block::order_key;
using block::quantize;
using BlockParams = block::MinMaxParams;

// Everything below that runs once per block or per element is force-inlined into loops that are
// instantiated for the default block sizes, so for full blocks the element count is a
// compile-time constant: the vector loops are fully unrolled, with no remainder handling.
#define LH_QUANT_INLINE [[gnu::always_inline]] inline

// The keys are scanned here (an integer min/max the compiler vectorizes); the header follows
// from them in block_codec.hpp. Unused in the AVX-512 build, whose encoders are its own.
[[maybe_unused]] LH_QUANT_INLINE BlockParams block_params(const float* __restrict x, std::size_t n,
                                                          float levels) {
  std::int32_t kmin = INT32_MAX;
  std::int32_t kmax = INT32_MIN;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t k = order_key(x[i]);
    kmin = k < kmin ? k : kmin;
    kmax = k > kmax ? k : kmax;
  }
  return block::minmax_params(kmin, kmax, levels);
}

// ---- blockwise encode -------------------------------------------------------------------------

// Encodes one block of n elements at `out` (header, then codes); returns the bytes written.
template <Codec C>
LH_QUANT_INLINE std::size_t encode_block(const float* __restrict x, std::size_t n,
                                         std::byte* __restrict out) {
  constexpr std::int32_t kLevelsInt = C == Codec::kU8 ? 255 : 15;
  constexpr auto kLevels = static_cast<float>(kLevelsInt);
  const BlockParams p = block_params(x, n, kLevels);
  write_header(out, p.lo, p.scale);
  auto* __restrict codes = reinterpret_cast<std::uint8_t*>(out + kHeaderBytes);
  const std::size_t payload = payload_bytes(C, n);
  if (!p.finite) {
    std::memset(codes, 0, payload);
    return kHeaderBytes + payload;
  }
  const float lo = p.lo;
  const float inv = p.inv;
  if constexpr (C == Codec::kU8) {
    for (std::size_t i = 0; i < n; ++i) {
      codes[i] = static_cast<std::uint8_t>(quantize<kLevelsInt>(x[i], lo, inv));
    }
  } else {
    const std::size_t pairs = n / 2;
    for (std::size_t j = 0; j < pairs; ++j) {
      const std::uint32_t q0 = quantize<kLevelsInt>(x[2 * j], lo, inv);
      const std::uint32_t q1 = quantize<kLevelsInt>(x[2 * j + 1], lo, inv);
      codes[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
    if (n % 2 != 0)
      codes[pairs] = static_cast<std::uint8_t>(quantize<kLevelsInt>(x[n - 1], lo, inv));
  }
  return kHeaderBytes + payload;
}

#if defined(LONGHAUL_QUANT_AVX512)
// encode_block of `blocks` (at most 16) consecutive blocks of n elements each, with AVX-512: the
// key scans first, then block_params for all of them at once, lane by lane (the same IEEE
// operations and checks, so the divisions of one block no longer stall its codes), then the
// codes. Returns the end of what it wrote. kFeedback: x holds error feedback's v = input +
// residual and is overwritten with the new residual in the same pass as the codes, the values
// feedback_block's decode with Sink::kResidual would leave.
template <Codec C, bool kFeedback = false>
std::byte* encode_blocks_avx512(std::conditional_t<kFeedback, float*, const float*> x,
                                std::size_t blocks, std::size_t n, std::byte* __restrict out) {
  constexpr std::int32_t kLevelsInt = C == Codec::kU8 ? 255 : 15;
  alignas(64) std::int32_t kmin[16];
  alignas(64) std::int32_t kmax[16];
  for (std::size_t b = 0; b < blocks; ++b) avx512::key_range(x + b * n, n, kmin[b], kmax[b]);
  const __mmask16 used = avx512::tail_mask(blocks);
  const __m512i kmin_v = _mm512_maskz_load_epi32(used, kmin);
  const __m512i kmax_v = _mm512_maskz_load_epi32(used, kmax);
  const __mmask16 non_finite = _mm512_cmpge_epi32_mask(kmax_v, _mm512_set1_epi32(kKeyPosInf)) |
                               _mm512_cmple_epi32_mask(kmin_v, _mm512_set1_epi32(kKeyNegInf));
  // key_to_float is the key transform itself (it is an involution).
  const __m512 lo = _mm512_castsi512_ps(avx512::order_keys(kmin_v));
  const __m512 hi = _mm512_castsi512_ps(avx512::order_keys(kmax_v));
  const __m512 range = _mm512_sub_ps(hi, lo);
  const __m512 levels = _mm512_set1_ps(static_cast<float>(kLevelsInt));
  const __m512 flt_max = _mm512_set1_ps(FLT_MAX);
  const __mmask16 too_wide =
      static_cast<__mmask16>(~_mm512_cmp_ps_mask(range, flt_max, _CMP_LE_OQ));
  const __m512 scale = _mm512_div_ps(range, levels);
  const __m512 inv = _mm512_div_ps(levels, range);
  const __mmask16 constant = static_cast<__mmask16>(~_mm512_cmp_ps_mask(inv, flt_max, _CMP_LE_OQ));
  const __mmask16 nan_block = non_finite | too_wide;
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kQuietNan)));
  alignas(64) float lo_a[16];
  alignas(64) float scale_a[16];
  alignas(64) float inv_a[16];
  _mm512_store_ps(lo_a, _mm512_mask_mov_ps(lo, nan_block, nan));
  _mm512_store_ps(scale_a,
                  _mm512_mask_mov_ps(_mm512_maskz_mov_ps(static_cast<__mmask16>(~constant), scale),
                                     nan_block, nan));
  _mm512_store_ps(inv_a, _mm512_maskz_mov_ps(static_cast<__mmask16>(~constant), inv));
  const std::size_t payload = payload_bytes(C, n);
  for (std::size_t b = 0; b < blocks; ++b) {
    write_header(out, lo_a[b], scale_a[b]);
    auto* __restrict codes = reinterpret_cast<std::uint8_t*>(out + kHeaderBytes);
    float* const v = const_cast<float*>(x + b * n);  // written only when kFeedback
    if ((nan_block >> b) & 1u) {
      std::memset(codes, 0, payload);
      if constexpr (kFeedback)
        for (std::size_t i = 0; i < n; ++i) v[i] = 0.0f;  // v - NaN is not finite
    } else {
      avx512::quantize<kLevelsInt, kFeedback>(v, n, lo_a[b], inv_a[b], scale_a[b], codes);
    }
    out += kHeaderBytes + payload;
  }
  return out;
}
#endif

// The blockwise encoders: the portable loops, written for the auto-vectorizer, or in the AVX-512
// build the hand-written ones of codec_avx512.hpp, which write the same bytes.
// kFixed != 0: full blocks have kFixed elements (== block), known at compile time.
template <Codec C, std::size_t kFixed>
void encode_blocks(const float* __restrict x, std::size_t count, std::byte* __restrict out,
                   std::size_t block) {
  const std::size_t bs = kFixed != 0 ? kFixed : block;
  const std::size_t full = count / bs;
#if defined(LONGHAUL_QUANT_AVX512)
  for (std::size_t b = 0; b < full; b += 16)
    out = encode_blocks_avx512<C>(x + b * bs, min_of(16, full - b), bs, out);
  if (count % bs != 0) encode_blocks_avx512<C>(x + full * bs, 1, count % bs, out);
#else
  for (std::size_t b = 0; b < full; ++b) out += encode_block<C>(x + b * bs, bs, out);
  if (count % bs != 0) encode_block<C>(x + full * bs, count % bs, out);
#endif
}

template <Codec C>
void encode_blockwise_c(const float* x, std::size_t count, std::byte* out, std::size_t block) {
  if (block == 128) {
    encode_blocks<C, 128>(x, count, out, block);
  } else if (block == 64) {
    encode_blocks<C, 64>(x, count, out, block);
  } else {
    encode_blocks<C, 0>(x, count, out, block);
  }
}

void encode_blockwise(const float* x, std::size_t count, std::byte* out, Codec codec,
                      std::size_t block) {
  if (codec == Codec::kU8) {
    encode_blockwise_c<Codec::kU8>(x, count, out, block);
  } else {
    encode_blockwise_c<Codec::kU4>(x, count, out, block);
  }
}

// ---- decode (store, accumulate, or subtract for error feedback: Sink, sink.hpp) ---------------

// Decodes one block of n elements from `in` into o; returns the bytes read.
template <Codec C, Sink S>
LH_QUANT_INLINE std::size_t decode_block(const std::byte* __restrict in, std::size_t n,
                                         float* __restrict o) {
  const BlockHeader h = read_header(in);
  const auto* __restrict codes = reinterpret_cast<const std::uint8_t*>(in + kHeaderBytes);
  const float lo = h.lo;
  const float scale = h.scale;
  if constexpr (C == Codec::kU8) {
    for (std::size_t i = 0; i < n; ++i) put<S>(o[i], block::dequantize(codes[i], lo, scale));
  } else {
    const std::size_t pairs = n / 2;
    for (std::size_t j = 0; j < pairs; ++j) {
      const std::uint32_t b = codes[j];
      put<S>(o[2 * j], block::dequantize(b & 15u, lo, scale));
      put<S>(o[2 * j + 1], block::dequantize(b >> 4, lo, scale));
    }
    if (n % 2 != 0) put<S>(o[n - 1], block::dequantize(codes[pairs] & 15u, lo, scale));
  }
  return kHeaderBytes + payload_bytes(C, n);
}

template <Codec C, Sink S, std::size_t kFixed>
void decode_blocks(const std::byte* __restrict in, std::size_t count, float* __restrict o,
                   std::size_t block) {
  const std::size_t bs = kFixed != 0 ? kFixed : block;
  const std::size_t full = count / bs;
  for (std::size_t b = 0; b < full; ++b) in += decode_block<C, S>(in, bs, o + b * bs);
  if (count % bs != 0) decode_block<C, S>(in, count % bs, o + full * bs);
}

template <Codec C, Sink S>
void decode_blockwise_c(const std::byte* in, std::size_t count, float* o, std::size_t block) {
  if (block == 128) {
    decode_blocks<C, S, 128>(in, count, o, block);
  } else if (block == 64) {
    decode_blocks<C, S, 64>(in, count, o, block);
  } else {
    decode_blocks<C, S, 0>(in, count, o, block);
  }
}

template <Sink S>
void decode_blockwise(const std::byte* in, std::size_t count, float* o, Codec codec,
                      std::size_t block) {
  if (codec == Codec::kU8) {
    decode_blockwise_c<Codec::kU8, S>(in, count, o, block);
  } else {
    decode_blockwise_c<Codec::kU4, S>(in, count, o, block);
  }
}

#if defined(LONGHAUL_QUANT_AVX512)
template <Sink S>
void decode_f16_avx512(const std::byte* in, std::size_t count, float* o) {
  avx512::for_each_f16x16(in, count,
                          [o](std::size_t i, __m512 v, __mmask16 m) { put16<S>(o + i, v, m); });
}
#endif

template <Sink S, float (*ToF32)(std::uint16_t)>
void decode_16(const std::byte* in, std::size_t count, float* o) {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t h;
    std::memcpy(&h, in + 2 * i, sizeof h);
    put<S>(o[i], ToF32(h));
  }
}

template <Sink S>
void decode_none(const std::byte* in, std::size_t count, float* o) {
  if constexpr (S == Sink::kStore) {
    std::memcpy(o, in, count * sizeof(float));
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, in + 4 * i, sizeof v);
      put<S>(o[i], v);
    }
  }
}

template <Sink S>
void decode_any(const std::byte* in, std::size_t count, float* o, Codec codec, std::size_t block) {
  switch (codec) {
    case Codec::kNone:
      decode_none<S>(in, count, o);
      return;
    case Codec::kFp16:
#if defined(LONGHAUL_QUANT_AVX512)
      return decode_f16_avx512<S>(in, count, o);
#else
      decode_16<S, f16_to_f32>(in, count, o);
      return;
#endif
    case Codec::kBf16:
      decode_16<S, bf16_to_f32>(in, count, o);
      return;
    case Codec::kU8:
    case Codec::kU4:
      decode_blockwise<S>(in, count, o, codec, block);
      return;
    case Codec::kE3M0:
      e3m0::decode(in, count, o, block, S);
      return;
  }
}

template <std::uint16_t (*FromF32)(float)>
void encode_16(const float* x, std::size_t count, std::byte* out) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint16_t h = FromF32(x[i]);
    std::memcpy(out + 2 * i, &h, sizeof h);
  }
}

void encode_any(const float* x, std::size_t count, std::byte* out, Codec codec, std::size_t block) {
  switch (codec) {
    case Codec::kNone:
      std::memcpy(out, x, count * sizeof(float));
      return;
    case Codec::kFp16:
#if defined(LONGHAUL_QUANT_AVX512)
      return avx512::encode_f16(x, count, out);
#else
      encode_16<f32_to_f16>(x, count, out);
      return;
#endif
    case Codec::kBf16:
      encode_16<f32_to_bf16>(x, count, out);
      return;
    case Codec::kU8:
    case Codec::kU4:
      encode_blockwise(x, count, out, codec, block);
      return;
    case Codec::kE3M0:
      e3m0::encode(x, count, out, block);
      return;
  }
}

// ---- error feedback, fused per block -------------------------------------------------------

// v = x + r into r, encode v, r = v - decode: all on one block, so the block stays in L1 and the
// three steps cost one pass over memory.
template <Codec C>
LH_QUANT_INLINE std::size_t feedback_block(const float* __restrict x, float* __restrict r,
                                           std::size_t n, std::byte* __restrict out) {
  for (std::size_t i = 0; i < n; ++i) r[i] = x[i] + r[i];
  const std::size_t bytes = encode_block<C>(r, n, out);
  decode_block<C, Sink::kResidual>(out, n, r);
  return bytes;
}

template <Codec C, std::size_t kFixed>
void feedback_blocks(const float* __restrict x, float* __restrict r, std::size_t count,
                     std::byte* __restrict out, std::size_t block) {
  const std::size_t bs = kFixed != 0 ? kFixed : block;
  const std::size_t full = count / bs;
#if defined(LONGHAUL_QUANT_AVX512)
  // Sixteen blocks at a time (8 KiB at the default block, still in L1), for the grouped encoder.
  for (std::size_t b = 0; b < full; b += 16) {
    const std::size_t m = min_of(16, full - b);
    const float* __restrict xg = x + b * bs;
    float* __restrict rg = r + b * bs;
    for (std::size_t i = 0; i < m * bs; ++i) rg[i] = xg[i] + rg[i];
    out = encode_blocks_avx512<C, true>(rg, m, bs, out);
  }
  if (const std::size_t rest = count % bs; rest != 0) {
    float* __restrict rt = r + full * bs;
    for (std::size_t i = 0; i < rest; ++i) rt[i] = x[full * bs + i] + rt[i];
    encode_blocks_avx512<C, true>(rt, 1, rest, out);
  }
#else
  for (std::size_t b = 0; b < full; ++b) out += feedback_block<C>(x + b * bs, r + b * bs, bs, out);
  if (count % bs != 0) feedback_block<C>(x + full * bs, r + full * bs, count % bs, out);
#endif
}

template <Codec C>
void feedback_blockwise_c(const float* x, float* r, std::size_t count, std::byte* out,
                          std::size_t block) {
  if (block == 128) {
    feedback_blocks<C, 128>(x, r, count, out, block);
  } else if (block == 64) {
    feedback_blocks<C, 64>(x, r, count, out, block);
  } else {
    feedback_blocks<C, 0>(x, r, count, out, block);
  }
}

void feedback_any(const float* x, float* r, std::size_t count, std::byte* out, Codec codec,
                  std::size_t block) {
  if (codec == Codec::kU8) return feedback_blockwise_c<Codec::kU8>(x, r, count, out, block);
  if (codec == Codec::kU4) return feedback_blockwise_c<Codec::kU4>(x, r, count, out, block);
  if (codec == Codec::kE3M0) {
    return e3m0::encode_with_error_feedback(x, r, count, out, block);
  }
  // Elementwise codecs: the same three steps on L1-sized tiles.
  constexpr std::size_t kTile = 2048;
  const std::size_t esize = codec == Codec::kNone ? sizeof(float) : sizeof(std::uint16_t);
  for (std::size_t start = 0; start < count; start += kTile) {
    const std::size_t n = min_of(kTile, count - start);
    float* rt = r + start;
    const float* xt = x + start;
    for (std::size_t i = 0; i < n; ++i) rt[i] = xt[i] + rt[i];
    encode_any(rt, n, out + start * esize, codec, block);
    decode_any<Sink::kResidual>(out + start * esize, n, rt, codec, block);
  }
}

void decode_entry(const std::byte* in, std::size_t count, float* out, Codec codec,
                  std::size_t block, Sink sink) {
  switch (sink) {
    case Sink::kStore:
      return decode_any<Sink::kStore>(in, count, out, codec, block);
    case Sink::kAdd:
      return decode_any<Sink::kAdd>(in, count, out, codec, block);
    case Sink::kResidual:
      return decode_any<Sink::kResidual>(in, count, out, codec, block);
  }
}

}  // namespace

constinit const CodecEntries kCodecEntries = {
    .encode = encode_any,
    .decode = decode_entry,
    .encode_with_error_feedback = feedback_any,
};

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant
