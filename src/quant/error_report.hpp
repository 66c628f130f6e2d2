// Quantization error measurement for tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.hpp"
#include "quant/codec.hpp"

namespace longhaul::quant {

// ||x - decode(encode(x))||_2 / ||x||_2, computed in double (0 when x is all zeros and the
// round trip is exact).
Result<double> relative_l2_error(std::span<const float> x, Codec codec,
                                 std::size_t block = kDefaultBlock);

// The blockwise codecs beside the `chunk_minmax` baseline: the same u8 quantizer with a single
// block spanning the whole chunk (one scale and offset for everything).
struct QuantErrorReport {
  double u8_blockwise = 0;    // relative L2 error of kU8 with `block`
  double u4_blockwise = 0;    // relative L2 error of kU4 with `block`
  double e3m0_blockwise = 0;  // relative L2 error of kE3M0 with `block`
  double u8_chunk = 0;        // relative L2 error of kU8 with block = x.size()
  double ratio = 0;           // u8_blockwise / u8_chunk
};
Result<QuantErrorReport> quant_error_report(std::span<const float> x,
                                            std::size_t block = kDefaultBlock);

// Gradient-like test data: n samples of N(0, 1), of which round(n * outlier_fraction) (at least one
// when the fraction is positive) at random positions are replaced by +-magnitude. Reproducible for
// a given seed with the same standard library.
std::vector<float> gaussian_with_outliers(std::size_t n, double outlier_fraction, float magnitude,
                                          std::uint64_t seed);

}  // namespace longhaul::quant
