// The codecs' GPU kernels against the CPU encoder (quant::encode_portable, which the quant tests
// hold to the scalar definitions): the same bytes for u8, u4 and E3M0, on random data, special
// values (NaN, +-Inf, -0, denormals, FLT_MAX ranges), exact ties and odd block sizes; decoding
// gives the CPU's floats bit for bit. Skipped, with the reason, where there is no CUDA device.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gpu/codec_device.hpp"
#include "quant/codec.hpp"
#include "tests/unit/gpu/device_buffer.hpp"

namespace longhaul::gpu {
namespace {

using quant::Codec;
using testing::DeviceBuffer;

// Values that stress the rounding: random normals, then specials sprinkled in.
std::vector<float> hard_values(std::size_t count, std::uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count);
  for (float& v : x) v = normal(rng);
  if (!specials) return x;
  const float pick[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        -0.0f,
                        0.0f,
                        std::numeric_limits<float>::denorm_min(),
                        -std::numeric_limits<float>::denorm_min() * 77.0f,
                        FLT_MIN,
                        FLT_MAX,
                        -FLT_MAX,
                        0.5f,
                        1.5f};
  std::uniform_int_distribution<std::size_t> where(0, count - 1);
  for (std::size_t k = 0; k < count / 50 + 1; ++k) x[where(rng)] = pick[rng() % std::size(pick)];
  return x;
}

// Blocks of 256 whose u8 codes are all exact midpoints: lo = 0 and hi = 255 make inv = 1, and
// every other element is k + 0.5 (round half to even decides each).
std::vector<float> ties(std::size_t count) {
  std::vector<float> x(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t k = i % 256;
    x[i] = k == 0 ? 0.0f : k == 255 ? 255.0f : static_cast<float>(k) + 0.5f;
  }
  return x;
}

// Tiny magnitudes: every E3M0 level and the u8 steps are subnormal.
std::vector<float> denormals(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(count);
  for (float& v : x)
    v = std::bit_cast<float>(static_cast<std::uint32_t>(rng() % 0x00800000u) |
                             (rng() % 2 != 0 ? 0x80000000u : 0u));
  return x;
}

void expect_same_as_cpu(const std::vector<float>& x, Codec codec, std::size_t block) {
  const std::size_t bytes = *quant::encoded_size(x.size(), codec, block);
  std::vector<std::byte> want(bytes);
  ASSERT_TRUE(quant::encode_portable(x, want, codec, block).is_ok());

  DeviceBuffer in(x.size() * sizeof(float)), out(bytes), back(x.size() * sizeof(float));
  in.upload(x);
  const Status encoded =
      encode_on_device(in.as<float>(), x.size(), out.as<std::byte>(), codec, block);
  ASSERT_TRUE(encoded.is_ok()) << encoded.message();
  const std::vector<std::byte> got = out.download<std::byte>();
  ASSERT_EQ(got, want) << quant::codec_name(codec) << " block " << block << " count " << x.size();

  std::vector<float> want_values(x.size());
  ASSERT_TRUE(quant::decode(want, want_values, codec, block).is_ok());
  const Status decoded =
      decode_on_device(out.as<std::byte>(), x.size(), back.as<float>(), codec, block);
  ASSERT_TRUE(decoded.is_ok()) << decoded.message();
  const std::vector<float> got_values = back.download<float>();
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got_values[i]),
              std::bit_cast<std::uint32_t>(want_values[i]))
        << quant::codec_name(codec) << " element " << i;
}

class GpuCodec : public ::testing::TestWithParam<Codec> {};

TEST_P(GpuCodec, KernelsWriteTheCpuBytesBitForBit) {
  LH_SKIP_WITHOUT_CUDA();
  const Codec codec = GetParam();
  for (std::size_t block : {std::size_t{128}, std::size_t{64}, std::size_t{7}, std::size_t{1000}}) {
    for (std::size_t count :
         {std::size_t{1}, std::size_t{127}, std::size_t{4097}, std::size_t{100003}}) {
      expect_same_as_cpu(hard_values(count, count * 31 + block, false), codec, block);
      expect_same_as_cpu(hard_values(count, count * 17 + block, true), codec, block);
    }
  }
  expect_same_as_cpu(ties(1 << 16), codec, 256);
  expect_same_as_cpu(ties(1 << 16), codec, 128);
  expect_same_as_cpu(denormals(1 << 16, 5), codec, 128);
}

TEST_P(GpuCodec, ALargeTensorEncodesTheSame) {
  LH_SKIP_WITHOUT_CUDA();
  expect_same_as_cpu(hard_values(std::size_t{1} << 24, 99, true), GetParam(), 128);
}

INSTANTIATE_TEST_SUITE_P(Blockwise, GpuCodec,
                         ::testing::Values(Codec::kU8, Codec::kU4, Codec::kE3M0),
                         [](const auto& p) { return std::string(quant::codec_name(p.param)); });

TEST(GpuCodecArguments, OtherCodecsAndBadBlocksAreRefused) {
  LH_SKIP_WITHOUT_CUDA();
  DeviceBuffer in(64 * sizeof(float)), out(1024);
  EXPECT_EQ(encode_on_device(in.as<float>(), 64, out.as<std::byte>(), Codec::kFp16).code(),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(encode_on_device(in.as<float>(), 64, out.as<std::byte>(), Codec::kU8, 0).code(),
            LH_ERR_INVALID_ARGUMENT);
  std::vector<float> host(64);
  EXPECT_EQ(encode_on_device(host.data(), 64, out.as<std::byte>(), Codec::kU8).code(),
            LH_ERR_INVALID_ARGUMENT);  // host memory is not the device's
}

}  // namespace
}  // namespace longhaul::gpu
