#include "quant/error_report.hpp"

#include <cmath>
#include <random>

namespace longhaul::quant {

Result<double> relative_l2_error(std::span<const float> x, Codec codec, std::size_t block) {
  Result<std::size_t> bytes = encoded_size(x.size(), codec, block);
  if (!bytes) return bytes.status();
  std::vector<std::byte> encoded(*bytes);
  std::vector<float> decoded(x.size());
  LH_RETURN_IF_ERROR(encode(x, encoded, codec, block));
  LH_RETURN_IF_ERROR(decode(encoded, decoded, codec, block));
  double err = 0;
  double norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(decoded[i]);
    err += d * d;
    norm += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  }
  if (norm == 0) return err == 0 ? 0.0 : HUGE_VAL;
  return std::sqrt(err / norm);
}

Result<QuantErrorReport> quant_error_report(std::span<const float> x, std::size_t block) {
  if (x.empty()) return invalid_argument("quant_error_report: empty input");
  QuantErrorReport r;
  Result<double> e = relative_l2_error(x, Codec::kU8, block);
  if (!e) return e.status();
  r.u8_blockwise = *e;
  e = relative_l2_error(x, Codec::kU4, block);
  if (!e) return e.status();
  r.u4_blockwise = *e;
  e = relative_l2_error(x, Codec::kE3M0, block);
  if (!e) return e.status();
  r.e3m0_blockwise = *e;
  e = relative_l2_error(x, Codec::kU8, x.size());
  if (!e) return e.status();
  r.u8_chunk = *e;
  r.ratio = r.u8_chunk > 0 ? r.u8_blockwise / r.u8_chunk : 0.0;
  return r;
}

std::vector<float> gaussian_with_outliers(std::size_t n, double outlier_fraction, float magnitude,
                                          std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  if (n == 0 || outlier_fraction <= 0) return x;
  auto outliers = static_cast<std::size_t>(std::llround(static_cast<double>(n) * outlier_fraction));
  outliers = std::max<std::size_t>(outliers, 1);
  std::uniform_int_distribution<std::size_t> pos(0, n - 1);
  for (std::size_t k = 0; k < outliers; ++k) {
    const std::size_t i = pos(rng);
    x[i] = (rng() & 1) != 0 ? magnitude : -magnitude;
  }
  return x;
}

}  // namespace longhaul::quant
