// libFuzzer target for the sparse top-k codec (src/quant/sparse_codec.hpp), whose decoder reads
// what a remote member sent. The first input byte picks a mode:
//   even: the rest is an encoding. validate, decode and decode_accumulate must agree: a rejection
//   is
//         LH_ERR_PROTOCOL with a message, and nothing is written; an accepted buffer decodes to
//         finite values, and decode_accumulate on zeros gives the same bits.
//   odd:  the rest sets chunk, topk and decay (3 bytes) and then f32 inputs and residuals. The
//   encoder
//         must accept finite inputs, produce a valid encoding within max_encoded_size whose values
//         plus the new residual equal the totals exactly, or refuse non-finite ones with
//         LH_ERR_INVALID_ARGUMENT and the residual untouched.
// A failed check traps. The same file is linked into the unit test SparseCodecGarbage, which runs
// it over random and mutated buffers in the normal build.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "quant/sparse_codec.hpp"

namespace longhaul::quant::sparse::fuzz {
namespace {

[[noreturn]] void fail(const char* what, int line) {
  std::fprintf(stderr, "sparse_codec_fuzz: check failed at sparse_codec_fuzz.cpp:%d: %s\n", line,
               what);
  std::fflush(stderr);
  __builtin_trap();
}

#define SPARSE_CHECK(cond)              \
  do {                                  \
    if (!(cond)) fail(#cond, __LINE__); \
  } while (0)

constexpr std::uint64_t kMaxDecoded = std::uint64_t{1} << 22;

void check_rejection(const Status& s) {
  SPARSE_CHECK(s.code() == LH_ERR_PROTOCOL);
  SPARSE_CHECK(!s.message().empty());
}

void fuzz_decoder(std::span<const std::byte> in) {
  const Status valid = validate(in);
  Result<Header> h = read_header(in);
  if (!h.is_ok()) {
    check_rejection(h.status());
    SPARSE_CHECK(!valid.is_ok());
    return;
  }
  if (h->count > kMaxDecoded) return;  // bounded allocation; validate ran on it all the same
  std::vector<float> out(h->count, 1.0f);
  std::vector<float> acc(h->count, 0.0f);
  const Status d = decode(in, out);
  const Status a = decode_accumulate(in, acc);
  SPARSE_CHECK(d.is_ok() == valid.is_ok() && a.is_ok() == valid.is_ok());
  if (!valid.is_ok()) {
    check_rejection(valid);
    check_rejection(d);
    for (float x : out) SPARSE_CHECK(x == 1.0f);  // nothing written on error
    for (float x : acc) SPARSE_CHECK(x == 0.0f);
    return;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    SPARSE_CHECK(std::isfinite(out[i]));
    SPARSE_CHECK(std::memcmp(&out[i], &acc[i], sizeof(float)) == 0);
  }
}

float float_at(std::span<const std::byte> in, std::size_t i) {
  float x;
  std::memcpy(&x, in.data() + 4 * i, sizeof(float));
  return x;
}

void fuzz_encoder(std::span<const std::byte> in) {
  if (in.size() < 3) return;
  Params p;
  p.chunk = 1 + std::to_integer<std::size_t>(in[0]) % 70;
  p.topk = 1 + std::to_integer<std::size_t>(in[1]) % 80;
  p.decay = static_cast<float>(std::to_integer<int>(in[2])) / 255.0f;
  const std::span<const std::byte> data = in.subspan(3);
  const std::size_t n = data.size() / 8;
  std::vector<float> x(n), residual(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = float_at(data, i);
    residual[i] = float_at(data, n + i);
  }
  std::vector<float> total(n);
  bool finite = true;
  for (std::size_t i = 0; i < n; ++i) {
    total[i] = x[i] + p.decay * residual[i];
    finite = finite && std::isfinite(total[i]);
  }
  const std::vector<float> before = residual;
  Result<std::size_t> max = max_encoded_size(n, p);
  SPARSE_CHECK(max.is_ok());
  std::vector<std::byte> out(*max);
  Result<std::size_t> r = encode_with_error_feedback(x, residual, out, p);
  if (!finite) {
    SPARSE_CHECK(!r.is_ok() && r.status().code() == LH_ERR_INVALID_ARGUMENT);
    SPARSE_CHECK(std::memcmp(before.data(), residual.data(), n * sizeof(float)) == 0);
    return;
  }
  SPARSE_CHECK(r.is_ok() && *r <= *max);
  out.resize(*r);
  std::vector<float> decoded(n);
  SPARSE_CHECK(decode(out, decoded).is_ok());
  for (std::size_t i = 0; i < n; ++i) SPARSE_CHECK(decoded[i] + residual[i] == total[i]);
}

}  // namespace
}  // namespace longhaul::quant::sparse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    longhaul::quant::sparse::fuzz::fuzz_decoder(rest);
  } else {
    longhaul::quant::sparse::fuzz::fuzz_encoder(rest);
  }
  return 0;
}
