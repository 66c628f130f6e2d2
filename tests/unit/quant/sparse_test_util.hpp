// Helpers of the sparse codec's tests: encode/decode into vectors, and a reference written from the
// text of docs/quantization.md ("Sparse top-k codec") with double compares and a full sort, sharing
// no code with the codec's selection or levels.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "quant/sparse_codec.hpp"

namespace longhaul::quant::sparse::testing {

inline std::uint32_t bits_of(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

inline std::vector<std::byte> encode_ok(const std::vector<float>& in, std::vector<float>& residual,
                                        const Params& p) {
  Result<std::size_t> max = max_encoded_size(in.size(), p);
  EXPECT_TRUE(max.is_ok()) << max.status().to_string();
  std::vector<std::byte> out(max.is_ok() ? *max : 0);
  Result<std::size_t> n = encode_with_error_feedback(in, residual, out, p);
  EXPECT_TRUE(n.is_ok()) << n.status().to_string();
  out.resize(n.is_ok() ? *n : 0);
  return out;
}

inline std::vector<float> decode_ok(const std::vector<std::byte>& bytes, std::size_t count) {
  std::vector<float> out(count, 12345.0f);
  const Status s = decode(bytes, out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

struct Expected {
  std::vector<float> decoded;
  std::vector<float> residual;
  std::vector<float> total;
};

// The reference: totals in f32 (in + decay * residual), S = max |t| truncated to bf16, candidates
// |t| >= S/4, the top k by (|t| descending, index ascending), S where |t| >= 3S/4 else S/2, signed.
inline Expected reference(const std::vector<float>& in, const std::vector<float>& residual,
                          const Params& p) {
  Expected e{std::vector<float>(in.size(), 0.0f), {}, {}};
  for (std::size_t i = 0; i < in.size(); ++i) e.total.push_back(in[i] + p.decay * residual[i]);
  e.residual = e.total;
  for (std::size_t base = 0; base < in.size(); base += p.chunk) {
    const std::size_t len = std::min(p.chunk, in.size() - base);
    double max_abs = 0;
    for (std::size_t i = 0; i < len; ++i)
      max_abs = std::max(max_abs, std::fabs(double(e.total[base + i])));
    const double s = std::bit_cast<float>(bits_of(static_cast<float>(max_abs)) & 0xFFFF0000u);
    if (s == 0) continue;
    std::vector<std::size_t> cand;
    for (std::size_t i = 0; i < len; ++i)
      if (std::fabs(double(e.total[base + i])) >= s / 4) cand.push_back(base + i);
    std::sort(cand.begin(), cand.end(), [&](std::size_t a, std::size_t b) {
      const double ma = std::fabs(double(e.total[a]));
      const double mb = std::fabs(double(e.total[b]));
      return ma != mb ? ma > mb : a < b;
    });
    cand.resize(std::min(cand.size(), p.topk));
    for (std::size_t i : cand) {
      const double m = std::fabs(double(e.total[i]));
      const double level = (m >= 0.75 * s ? s : s / 2) * (std::signbit(e.total[i]) ? -1 : 1);
      e.decoded[i] = static_cast<float>(level);
      e.residual[i] = e.total[i] - e.decoded[i];
    }
  }
  return e;
}

// Encodes with the codec and checks it against the reference bit for bit, and that what is sent
// plus what is kept is the total exactly. residual is updated; the encoding goes to *bytes_out.
inline void encode_and_check(const std::vector<float>& in, std::vector<float>& residual,
                             const Params& p, std::vector<std::byte>* bytes_out = nullptr) {
  const Expected want = reference(in, residual, p);
  std::vector<std::byte> bytes = encode_ok(in, residual, p);
  if (bytes_out != nullptr) *bytes_out = bytes;
  const std::vector<float> got = decode_ok(bytes, in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(bits_of(got[i]), bits_of(want.decoded[i])) << "decoded " << i;
    ASSERT_EQ(bits_of(residual[i]), bits_of(want.residual[i])) << "residual " << i;
    // sent + kept == total, bit for bit (a zero total compares by value: +0 + -0 is +0).
    const float sum = got[i] + residual[i];
    if (want.total[i] == 0.0f) {
      ASSERT_EQ(sum, 0.0f) << i;
    } else {
      ASSERT_EQ(bits_of(sum), bits_of(want.total[i])) << "sent + kept != total at " << i;
    }
  }
}

}  // namespace longhaul::quant::sparse::testing
