// All-reduces of CUDA device memory through the public API, beside a CPU peer: a GPU peer and a
// CPU peer in one ring get the same bytes, for every codec, in place or not, f32 and bf16; the
// collectives that do not stage device memory yet refuse it. Skipped, with the reason, where there
// is no CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <longhaul/longhaul.hpp>

#include "tests/unit/gpu/two_peers.hpp"

namespace {

using longhaul::gpu::testing::DeviceBuffer;

std::vector<float> normals(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count);
  for (float& v : x) v = normal(rng);
  return x;
}

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

class GpuAllReduce : public longhaul::gpu::testing::TwoPeers {
 protected:
  // The result both peers get when both hold their input in host memory.
  std::vector<float> host_result(const std::vector<float>& x, const std::vector<float>& y,
                                 const longhaul::AllReduceOptions& o) {
    std::vector<float> a = x, b = y;
    both([&] { gpu().allreduce(std::span(a), longhaul::ReduceOp::kSum, o); },
         [&] { cpu().allreduce(std::span(b), longhaul::ReduceOp::kSum, o); });
    EXPECT_TRUE(same_bytes(a, b));
    return a;
  }
};

TEST_F(GpuAllReduce, AGpuPeerAndACpuPeerGetTheSameBytesForEveryCodec) {
  const std::size_t n = (1u << 20) + 77;
  const std::vector<float> x = normals(n, 1), y = normals(n, 2);
  for (lh_codec codec : {LH_CODEC_NONE, LH_CODEC_BF16, LH_CODEC_U8, LH_CODEC_U4, LH_CODEC_E3M0}) {
    longhaul::AllReduceOptions o;
    o.codec = codec;
    const std::vector<float> want = host_result(x, y, o);

    DeviceBuffer in(n * sizeof(float)), out(n * sizeof(float));
    in.upload(x);
    std::vector<float> cpu_side = y;
    both(
        [&] {
          gpu().allreduce(std::span<const float>(in.as<float>(), n),
                          std::span<float>(out.as<float>(), n), longhaul::ReduceOp::kSum, o);
        },
        [&] { cpu().allreduce(std::span(cpu_side), longhaul::ReduceOp::kSum, o); });
    EXPECT_TRUE(same_bytes(out.download<float>(), want)) << "codec " << codec;
    EXPECT_TRUE(same_bytes(cpu_side, want)) << "codec " << codec;
    EXPECT_TRUE(same_bytes(in.download<float>(), x)) << "the device input is left as it was";
  }
}

TEST_F(GpuAllReduce, InPlaceBf16OnTheDeviceAverages) {
  const std::size_t n = 300001;
  std::vector<std::uint16_t> x(n, 0x4000), y(n, 0x4080);  // bf16 2.0 and 4.0
  DeviceBuffer buffer(n * sizeof(std::uint16_t));
  buffer.upload(x);
  longhaul::AllReduceOptions o;
  o.memory = LH_MEMORY_CUDA;  // declared rather than detected
  both(
      [&] {
        lh_allreduce_options c = o.c_options();
        ASSERT_EQ(lh_allreduce(gpu().get(), buffer.as<void>(), buffer.as<void>(), n, LH_DTYPE_BF16,
                               LH_OP_AVG, &c, nullptr),
                  LH_OK);
      },
      [&] {
        lh_allreduce_options c;
        lh_allreduce_options_init(&c);
        ASSERT_EQ(
            lh_allreduce(cpu().get(), y.data(), y.data(), n, LH_DTYPE_BF16, LH_OP_AVG, &c, nullptr),
            LH_OK);
      });
  const std::vector<std::uint16_t> got = buffer.download<std::uint16_t>();
  EXPECT_EQ(got[0], 0x4040);  // bf16 3.0
  EXPECT_EQ(got[n - 1], 0x4040);
  EXPECT_TRUE(same_bytes(got, y));
}

TEST_F(GpuAllReduce, HostMemoryDeclaredCudaAndUnstagedCollectivesAreRefused) {
  std::vector<float> host(16, 1.0f);
  longhaul::AllReduceOptions o;
  o.memory = LH_MEMORY_CUDA;
  try {
    gpu().allreduce(std::span(host), longhaul::ReduceOp::kSum, o);
    ADD_FAILURE() << "host memory declared as device memory was taken";
  } catch (const longhaul::Error& e) {
    EXPECT_EQ(e.status(), LH_ERR_INVALID_ARGUMENT) << e.what();
  }
  DeviceBuffer device(16 * sizeof(float));
  lh_allreduce_options c;
  lh_allreduce_options_init(&c);
  EXPECT_EQ(lh_broadcast(gpu().get(), device.as<void>(), 16, LH_DTYPE_F32, 0, &c, nullptr),
            LH_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(lh_comm_last_error(gpu().get())).find("device memory"), std::string::npos);
}

}  // namespace
