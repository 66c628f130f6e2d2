// The reduction kernels of reduce.hpp, compiled once per ISA (kernels.hpp). They are plain loops
// over arrays with every per-element branch written as a select, so GCC vectorizes them at
// -O2/-O3 without -ffast-math: none needs reassociation, because each element is independent (no
// horizontal reduction). The AVX-512 build replaces the half-precision ones with
// codec_avx512.hpp's conversions.
#include "quant/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/codec_avx512.hpp"
#include "quant/half.hpp"
#include "quant/kernels.hpp"

namespace longhaul::quant {
inline namespace LH_QUANT_ISA_NS {
namespace {

// ---- per-element operators -------------------------------------------------------------------

// Integers: unsigned arithmetic at least 32 bits wide, so the operation wraps instead of
// overflowing (8-bit values would otherwise be promoted to int, where prod cannot overflow but the
// intent is clearer this way), then truncated back to the element type (modular since C++20).
template <class T>
using Wide = std::conditional_t<(sizeof(T) < 4), std::uint32_t, std::make_unsigned_t<T>>;

template <class T>
inline T int_add(T a, T b) {
  return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
}
template <class T>
inline T int_mul(T a, T b) {
  return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
}
template <class T>
inline T int_min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
inline T int_max(T a, T b) {
  return b > a ? b : a;
}

// Floats: min/max propagate NaN from either side; a tie (+0 vs -0) returns b (src).
template <class F>
inline F fp_min(F a, F b) {
  return (a < b || a != a) ? a : b;
}
template <class F>
inline F fp_max(F a, F b) {
  return (a > b || a != a) ? a : b;
}

// ---- loops ---------------------------------------------------------------------------------

template <class T, class Op>
void combine(T* dst, const T* src, std::size_t n, Op op) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = op(dst[i], src[i]);
}

template <class T>
void reduce_int(void* d, const void* s, std::size_t n, ReduceOp op) {
  T* dst = static_cast<T*>(d);
  const T* src = static_cast<const T*>(s);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      combine(dst, src, n, int_add<T>);
      return;
    case ReduceOp::kProd:
      combine(dst, src, n, int_mul<T>);
      return;
    case ReduceOp::kMin:
      combine(dst, src, n, int_min<T>);
      return;
    case ReduceOp::kMax:
      combine(dst, src, n, int_max<T>);
      return;
  }
}

template <class F>
void reduce_fp(void* d, const void* s, std::size_t n, ReduceOp op) {
  F* dst = static_cast<F*>(d);
  const F* src = static_cast<const F*>(s);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      combine(dst, src, n, [](F a, F b) { return a + b; });
      return;
    case ReduceOp::kProd:
      combine(dst, src, n, [](F a, F b) { return a * b; });
      return;
    case ReduceOp::kMin:
      combine(dst, src, n, fp_min<F>);
      return;
    case ReduceOp::kMax:
      combine(dst, src, n, fp_max<F>);
      return;
  }
}

// 16-bit floats: widen both sides, combine in f32, round back to nearest even.
template <float (*ToF32)(std::uint16_t), std::uint16_t (*FromF32)(float), class Op>
void combine16(std::uint16_t* dst, const std::uint16_t* src, std::size_t n, Op op) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = FromF32(op(ToF32(dst[i]), ToF32(src[i])));
}

template <float (*ToF32)(std::uint16_t), std::uint16_t (*FromF32)(float)>
void reduce_16(void* d, const void* s, std::size_t n, ReduceOp op) {
  auto* dst = static_cast<std::uint16_t*>(d);
  const auto* src = static_cast<const std::uint16_t*>(s);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      combine16<ToF32, FromF32>(dst, src, n, [](float a, float b) { return a + b; });
      return;
    case ReduceOp::kProd:
      combine16<ToF32, FromF32>(dst, src, n, [](float a, float b) { return a * b; });
      return;
    case ReduceOp::kMin:
      combine16<ToF32, FromF32>(dst, src, n, fp_min<float>);
      return;
    case ReduceOp::kMax:
      combine16<ToF32, FromF32>(dst, src, n, fp_max<float>);
      return;
  }
}

template <class T>
void divide_int(void* d, std::size_t count, std::size_t n) {
  T* dst = static_cast<T*>(d);
  if constexpr (std::is_signed_v<T>) {
    const auto divisor = static_cast<std::int64_t>(n);
    for (std::size_t i = 0; i < count; ++i) {
      dst[i] = static_cast<T>(static_cast<std::int64_t>(dst[i]) / divisor);
    }
  } else {
    const auto divisor = static_cast<std::uint64_t>(n);
    for (std::size_t i = 0; i < count; ++i) {
      dst[i] = static_cast<T>(static_cast<std::uint64_t>(dst[i]) / divisor);
    }
  }
}

template <class F>
void divide_fp(void* d, std::size_t count, std::size_t n) {
  F* dst = static_cast<F*>(d);
  const F divisor = static_cast<F>(n);
  for (std::size_t i = 0; i < count; ++i) dst[i] = dst[i] / divisor;
}

// sum_widened, portably: a block of f32 accumulators small enough for registers or L1, each loop
// over it one the compiler vectorizes.
template <float (*ToF32)(std::uint16_t), std::uint16_t (*FromF32)(float)>
void sum_widened_16(std::uint16_t* dst, const void* const* sources, std::size_t num_sources,
                    std::size_t count, std::size_t average_over) {
  constexpr std::size_t kBlock = 64;
  const float divisor = static_cast<float>(average_over);
  for (std::size_t b = 0; b < count; b += kBlock) {
    const std::size_t m = min_of(kBlock, count - b);
    float acc[kBlock];
    for (std::size_t i = 0; i < m; ++i) acc[i] = -0.0f + ToF32(dst[b + i]);
    for (std::size_t k = 0; k < num_sources; ++k) {
      const auto* src = static_cast<const std::uint16_t*>(sources[k]) + b;
      for (std::size_t i = 0; i < m; ++i) acc[i] += ToF32(src[i]);
    }
    if (average_over > 1)
      for (std::size_t i = 0; i < m; ++i) acc[i] = acc[i] / divisor;
    for (std::size_t i = 0; i < m; ++i) dst[b + i] = FromF32(acc[i]);
  }
}

#if defined(LONGHAUL_QUANT_AVX512)
// The AVX-512 form, with the conversions of codec_avx512.hpp (f16: the hardware ones and their
// NaN patches): 16 lanes at a time, the accumulator in a register.
template <__m512 (*Widen)(__m256i), __m256i (*Narrow)(__m512)>
void sum_widened_avx512(std::byte* dst, const void* const* sources, std::size_t num_sources,
                        std::size_t count, std::size_t average_over) {
  const __m512 divisor = _mm512_set1_ps(static_cast<float>(average_over));
  // Inlined twice: with the constant kAllLanes for whole vectors, whose loads and stores are then
  // unmasked (masked stores are slow on some CPUs), and once for the tail.
  auto step = [&](std::size_t i, __mmask16 m) __attribute__((always_inline)) {
    __m512 acc =
        _mm512_add_ps(_mm512_set1_ps(-0.0f), Widen(_mm256_maskz_loadu_epi16(m, dst + 2 * i)));
    for (std::size_t k = 0; k < num_sources; ++k)
      acc = _mm512_add_ps(acc, Widen(_mm256_maskz_loadu_epi16(
                                   m, static_cast<const std::byte*>(sources[k]) + 2 * i)));
    if (average_over > 1) acc = _mm512_div_ps(acc, divisor);
    _mm256_mask_storeu_epi16(dst + 2 * i, m, Narrow(acc));
  };
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) step(i, avx512::kAllLanes);
  if (i < count) step(i, avx512::tail_mask(count - i));
}
#endif

#if defined(LONGHAUL_QUANT_AVX512)
// reduce_16 for min, max and prod with the conversions of codec_avx512.hpp: the same selects and
// multiplication as fp_min/fp_max and the product, 16 lanes at a time.
template <__m512 (*Widen)(__m256i), __m256i (*Narrow)(__m512)>
void reduce_16_avx512(std::byte* dst, const std::byte* src, std::size_t count, ReduceOp op) {
  auto combine = [op](__m512 a, __m512 b) __attribute__((always_inline)) {
    if (op == ReduceOp::kProd) return _mm512_mul_ps(a, b);
    // fp_min/fp_max: a where a wins or a is NaN, else b (also on a tie of +0 and -0).
    const __mmask16 a_nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    const __mmask16 a_wins = op == ReduceOp::kMin ? _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
                                                  : _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ);
    return _mm512_mask_blend_ps(static_cast<__mmask16>(a_wins | a_nan), b, a);
  };
  auto step = [&](std::size_t i, __mmask16 m) __attribute__((always_inline)) {
    const __m512 a = Widen(_mm256_maskz_loadu_epi16(m, dst + 2 * i));
    const __m512 b = Widen(_mm256_maskz_loadu_epi16(m, src + 2 * i));
    _mm256_mask_storeu_epi16(dst + 2 * i, m, Narrow(combine(a, b)));
  };
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) step(i, avx512::kAllLanes);
  if (i < count) step(i, avx512::tail_mask(count - i));
}
#endif

// reduce_into's min, max and prod for f16 or bf16 (checked by the caller).
void min_max_prod_16(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
#if defined(LONGHAUL_QUANT_AVX512)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (dtype == DType::kF16)
    reduce_16_avx512<avx512::f32x16, avx512::f16x16>(d, s, count, op);
  else
    reduce_16_avx512<avx512::bf16_to_f32x16, avx512::f32_to_bf16x16>(d, s, count, op);
#else
  if (dtype == DType::kF16)
    reduce_16<f16_to_f32, f32_to_f16>(dst, src, count, op);
  else
    reduce_16<bf16_to_f32, f32_to_bf16>(dst, src, count, op);
#endif
}

// sum_widened's kernels, for f16 or bf16 (checked by the caller).
void sum_widened_any(void* dst, const void* const* sources, std::size_t num_sources,
                     std::size_t count, DType dtype, std::size_t average_over) {
#if defined(LONGHAUL_QUANT_AVX512)
  if (dtype == DType::kF16)
    sum_widened_avx512<avx512::f32x16, avx512::f16x16>(static_cast<std::byte*>(dst), sources,
                                                       num_sources, count, average_over);
  else
    sum_widened_avx512<avx512::bf16_to_f32x16, avx512::f32_to_bf16x16>(
        static_cast<std::byte*>(dst), sources, num_sources, count, average_over);
#else
  if (dtype == DType::kF16)
    sum_widened_16<f16_to_f32, f32_to_f16>(static_cast<std::uint16_t*>(dst), sources, num_sources,
                                           count, average_over);
  else
    sum_widened_16<bf16_to_f32, f32_to_bf16>(static_cast<std::uint16_t*>(dst), sources, num_sources,
                                             count, average_over);
#endif
}

template <float (*ToF32)(std::uint16_t), std::uint16_t (*FromF32)(float)>
void divide_16(void* d, std::size_t count, std::size_t n) {
  auto* dst = static_cast<std::uint16_t*>(d);
  const float divisor = static_cast<float>(n);
  for (std::size_t i = 0; i < count; ++i) dst[i] = FromF32(ToF32(dst[i]) / divisor);
}

void reduce_into_entry(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32:
      reduce_fp<float>(dst, src, count, op);
      break;
    case DType::kF64:
      reduce_fp<double>(dst, src, count, op);
      break;
    case DType::kF16:
    case DType::kBF16:
      if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
        // The same bits as widening both, adding, rounding: -0 + x is x, NaNs aside, and a NaN
        // stays one (its payload, with two, is the operand order's; see reduce.hpp).
        const void* sources[] = {src};
        sum_widened_any(dst, sources, 1, count, dtype, 1);
      } else {
        min_max_prod_16(dst, src, count, dtype, op);
      }
      break;
    case DType::kI8:
      reduce_int<std::int8_t>(dst, src, count, op);
      break;
    case DType::kU8:
      reduce_int<std::uint8_t>(dst, src, count, op);
      break;
    case DType::kI32:
      reduce_int<std::int32_t>(dst, src, count, op);
      break;
    case DType::kU32:
      reduce_int<std::uint32_t>(dst, src, count, op);
      break;
    case DType::kI64:
      reduce_int<std::int64_t>(dst, src, count, op);
      break;
    case DType::kU64:
      reduce_int<std::uint64_t>(dst, src, count, op);
      break;
  }
}

void finalize_avg_entry(void* dst, std::size_t count, DType dtype, std::size_t n) {
  switch (dtype) {
    case DType::kF32:
      divide_fp<float>(dst, count, n);
      break;
    case DType::kF64:
      divide_fp<double>(dst, count, n);
      break;
    case DType::kF16:
      divide_16<f16_to_f32, f32_to_f16>(dst, count, n);
      break;
    case DType::kBF16:
      divide_16<bf16_to_f32, f32_to_bf16>(dst, count, n);
      break;
    case DType::kI8:
      divide_int<std::int8_t>(dst, count, n);
      break;
    case DType::kU8:
      divide_int<std::uint8_t>(dst, count, n);
      break;
    case DType::kI32:
      divide_int<std::int32_t>(dst, count, n);
      break;
    case DType::kU32:
      divide_int<std::uint32_t>(dst, count, n);
      break;
    case DType::kI64:
      divide_int<std::int64_t>(dst, count, n);
      break;
    case DType::kU64:
      divide_int<std::uint64_t>(dst, count, n);
      break;
  }
}

void accumulate_f32_entry(float* acc, const void* src, std::size_t count, DType dtype) {
  if (dtype == DType::kF32) {
    const auto* s = static_cast<const float*>(src);
    for (std::size_t i = 0; i < count; ++i) acc[i] += s[i];
  } else if (dtype == DType::kF16) {
#if defined(LONGHAUL_QUANT_AVX512)
    // The codec's fp16 path: hardware conversion with the NaN payloads of f16_to_f32.
    avx512::for_each_f16x16(
        static_cast<const std::byte*>(src), count, [acc](std::size_t i, __m512 v, __mmask16 m) {
          _mm512_mask_storeu_ps(acc + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + i), v));
        });
#else
    const auto* s = static_cast<const std::uint16_t*>(src);
    for (std::size_t i = 0; i < count; ++i) acc[i] += f16_to_f32(s[i]);
#endif
  } else {
    const auto* s = static_cast<const std::uint16_t*>(src);
    for (std::size_t i = 0; i < count; ++i) acc[i] += bf16_to_f32(s[i]);
  }
}

void store_from_f32_entry(void* dst, const float* acc, std::size_t count, DType dtype) {
  if (dtype == DType::kF32) {
    if (dst != acc) std::memmove(dst, acc, count * sizeof(float));
  } else if (dtype == DType::kF16) {
#if defined(LONGHAUL_QUANT_AVX512)
    avx512::encode_f16(acc, count, static_cast<std::byte*>(dst));
#else
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < count; ++i) d[i] = f32_to_f16(acc[i]);
#endif
  } else {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < count; ++i) d[i] = f32_to_bf16(acc[i]);
  }
}

}  // namespace

constinit const ReduceEntries kReduceEntries = {
    .reduce_into = reduce_into_entry,
    .finalize_avg = finalize_avg_entry,
    .accumulate_f32 = accumulate_f32_entry,
    .store_from_f32 = store_from_f32_entry,
    .sum_widened = sum_widened_any,
};

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant
