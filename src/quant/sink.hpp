// Where a decoder puts each decoded value: shared by the codecs of codec.cpp and e3m0.cpp, so that
// every codec's decode, decode_accumulate and error-feedback residual do the same single IEEE
// operation per element (and the vector loops the same operation per lane).
#pragma once

#include "quant/codec_avx512.hpp"
#include "quant/isa_namespace.hpp"

namespace longhaul::quant {

enum class Sink { kStore, kAdd, kResidual };

inline namespace LH_QUANT_ISA_NS {

// kResidual: r = r - v, and a non-finite result becomes 0 (see encode_with_error_feedback).
template <Sink S>
[[gnu::always_inline]] inline void put(float& o, float v) {
  if constexpr (S == Sink::kStore) {
    o = v;
  } else if constexpr (S == Sink::kAdd) {
    o = o + v;
  } else {
    const float r = o - v;
    o = (r - r == 0.0f) ? r : 0.0f;  // r - r is NaN exactly when r is NaN or Inf
  }
}

#if defined(LONGHAUL_QUANT_AVX512)
// put<S> for 16 floats, lanes outside `m` untouched.
template <Sink S>
[[gnu::always_inline]] inline void put16(float* o, __m512 v, __mmask16 m) {
  if constexpr (S == Sink::kStore) {
    _mm512_mask_storeu_ps(o, m, v);
  } else if constexpr (S == Sink::kAdd) {
    _mm512_mask_storeu_ps(o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), v));
  } else {
    const __m512 r = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, o), v);
    const __mmask16 finite =
        _mm512_cmp_ps_mask(_mm512_sub_ps(r, r), _mm512_setzero_ps(), _CMP_EQ_OQ);
    _mm512_mask_storeu_ps(o, m, _mm512_maskz_mov_ps(finite, r));
  }
}
#endif

}  // namespace LH_QUANT_ISA_NS
}  // namespace longhaul::quant
