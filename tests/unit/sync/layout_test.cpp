#include "sync/layout.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "quant/half.hpp"
#include "runtime/worker_pool.hpp"

namespace longhaul::sync {
namespace {

TEST(Layout, WithoutPiecesRangeIGoesToFragmentIModF) {
  std::vector<float> a(10), b(20), c(30);
  auto layout = Layout::make({{a.data(), 10, quant::DType::kF32},
                              {b.data(), 20, quant::DType::kF32},
                              {c.data(), 30, quant::DType::kF32}},
                             {}, 2);
  ASSERT_TRUE(layout.is_ok());
  EXPECT_EQ(layout->fragment_size(0), 40u);  // ranges 0 and 2
  EXPECT_EQ(layout->fragment_size(1), 20u);
  EXPECT_EQ(layout->largest_fragment(), 40u);
  EXPECT_EQ(layout->total_elements(), 60u);
}

TEST(Layout, ReadsAndMergesPiecesInOrderAndRoundsBf16ToNearestEven) {
  runtime::WorkerPool workers(2);
  std::vector<float> f32(100);
  std::iota(f32.begin(), f32.end(), 0.0f);
  std::vector<uint16_t> bf16(50);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = quant::f32_to_bf16(static_cast<float>(i));
  auto layout =
      Layout::make({{f32.data(), 100, quant::DType::kF32}, {bf16.data(), 50, quant::DType::kBF16}},
                   {{0, 1, 10, 5}, {0, 0, 90, 10}, {1, 0, 0, 90}}, 2);
  ASSERT_TRUE(layout.is_ok());
  std::vector<float> got(15);
  ASSERT_TRUE(layout->read(0, got, workers).is_ok());
  EXPECT_EQ(got, (std::vector<float>{10, 11, 12, 13, 14, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99}));
  std::vector<float> global(15, 1.0f + 1.0f / 256.0f + 1.0f / 512.0f);  // between 1 and 1 + 2^-7
  ASSERT_TRUE(layout->merge(0, global, 0.0f, workers).is_ok());
  EXPECT_EQ(quant::bf16_to_f32(bf16[10]), 1.0f + 1.0f / 128.0f);  // the nearest bf16
  EXPECT_EQ(f32[95], global[10]);
  EXPECT_EQ(f32[0], 0.0f);  // not in fragment 0
}

TEST(Layout, BadLayoutsAreRefusedWithTheirReason) {
  std::vector<float> a(10);
  std::vector<double> d(10);
  const ParamRange r{a.data(), 10, quant::DType::kF32};
  EXPECT_EQ(Layout::make({}, {}, 1).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Layout::make({{d.data(), 10, quant::DType::kF64}}, {}, 1).status().code(),
            LH_ERR_UNSUPPORTED);
  EXPECT_EQ(Layout::make({{nullptr, 10, quant::DType::kF32}}, {}, 1).status().code(),
            LH_ERR_INVALID_ARGUMENT);
  auto overlap = Layout::make({r}, {{0, 0, 0, 6}, {0, 0, 5, 5}}, 1);
  ASSERT_FALSE(overlap.is_ok());
  EXPECT_NE(overlap.status().message().find("overlap"), std::string::npos);
  auto outside = Layout::make({r}, {{0, 0, 8, 5}}, 1);
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.status().message().find("exceeds"), std::string::npos);
  EXPECT_EQ(Layout::make({r}, {{1, 0, 0, 5}}, 1).status().code(), LH_ERR_INVALID_ARGUMENT);
  auto empty_fragment = Layout::make({r}, {{0, 0, 0, 10}}, 2);
  ASSERT_FALSE(empty_fragment.is_ok());
  EXPECT_NE(empty_fragment.status().message().find("fragment 1"), std::string::npos);
}

// Device memory as the layout sees it, played by host memory: copies are memcpy, counted, and
// fail on request. What runs on a GPU is the same staging with the CUDA copy stream underneath
// (gpu_sync_test).
class HostPlaysDevice final : public DeviceCopies {
 public:
  Result<std::shared_ptr<std::byte>> host_buffer(size_t bytes) override {
    if (!mirror_error.is_ok()) return mirror_error;
    mirror_bytes = bytes;
    return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }
  Status to_host(void* host, const void* device, size_t bytes) override {
    if (!in_error.is_ok()) return in_error;
    std::memcpy(host, device, bytes);
    bytes_in += bytes;
    return Status::ok();
  }
  Status to_device(void* device, const void* host, size_t bytes) override {
    if (!out_error.is_ok()) return out_error;
    std::memcpy(device, host, bytes);
    bytes_out += bytes;
    return Status::ok();
  }
  Status mirror_error, in_error, out_error;
  size_t mirror_bytes = 0, bytes_in = 0, bytes_out = 0;
};

// Parameters of both kinds over two fragments: f32 [0, 100) and bf16 [0, 50).
struct Params {
  std::vector<float> f32 = std::vector<float>(100);
  std::vector<uint16_t> bf16 = std::vector<uint16_t>(50);
  Params() {
    std::iota(f32.begin(), f32.end(), 0.5f);
    for (size_t i = 0; i < bf16.size(); ++i)
      bf16[i] = quant::f32_to_bf16(0.25f * static_cast<float>(i));
  }
  Result<Layout> layout(bool device_bf16, std::shared_ptr<DeviceCopies> copies) {
    return Layout::make({{f32.data(), 100, quant::DType::kF32, /*on_device=*/true},
                         {bf16.data(), 50, quant::DType::kBF16, device_bf16}},
                        {{0, 1, 10, 5}, {0, 0, 90, 10}, {1, 0, 0, 90}, {1, 1, 20, 30}}, 2,
                        std::move(copies));
  }
};

TEST(Layout, DevicePiecesAreStagedThroughOneMirrorAndEndAsHostPiecesDo) {
  runtime::WorkerPool workers(2);
  Params host, device;
  auto host_layout = Layout::make(
      {{host.f32.data(), 100, quant::DType::kF32}, {host.bf16.data(), 50, quant::DType::kBF16}},
      {{0, 1, 10, 5}, {0, 0, 90, 10}, {1, 0, 0, 90}, {1, 1, 20, 30}}, 2);
  auto copies = std::make_shared<HostPlaysDevice>();
  auto layout = device.layout(/*device_bf16=*/true, copies);
  ASSERT_TRUE(host_layout.is_ok() && layout.is_ok()) << layout.status().to_string();
  // The fragments share one mirror: the larger one's device bytes, each piece 64-byte aligned.
  EXPECT_EQ(layout->mirror_bytes(), 384u + 64u);  // fragment 1: 90 f32, then 30 bf16
  EXPECT_EQ(copies->mirror_bytes, layout->mirror_bytes());
  for (size_t f = 0; f < 2; ++f) {
    std::vector<float> want(host_layout->fragment_size(f)), got(want.size());
    ASSERT_TRUE(host_layout->read(f, want, workers).is_ok());
    ASSERT_TRUE(layout->read(f, got, workers).is_ok());
    EXPECT_EQ(got, want);
    std::vector<float> global(want.size());
    for (size_t i = 0; i < global.size(); ++i) global[i] = 1.0f / (3.0f + static_cast<float>(i));
    ASSERT_TRUE(host_layout->merge(f, global, 0.25f, workers).is_ok());
    ASSERT_TRUE(layout->merge(f, global, 0.25f, workers).is_ok());
  }
  EXPECT_EQ(device.f32, host.f32);  // merged bit for bit, bf16 rounding included
  EXPECT_EQ(device.bf16, host.bf16);
  // A read copies in; a merge (α > 0) copies in and out: each fragment's device bytes, no more.
  const size_t fragment_bytes = (5 * 2 + 10 * 4) + (90 * 4 + 30 * 2);
  EXPECT_EQ(copies->bytes_in, 2 * fragment_bytes);
  EXPECT_EQ(copies->bytes_out, fragment_bytes);
  // α = 0 sets the parameters to θ_g without reading them: nothing is copied in.
  copies->bytes_in = copies->bytes_out = 0;
  for (size_t f = 0; f < 2; ++f) {
    const std::vector<float> global(host_layout->fragment_size(f), 0.75f + static_cast<float>(f));
    ASSERT_TRUE(host_layout->merge(f, global, 0.0f, workers).is_ok());
    ASSERT_TRUE(layout->merge(f, global, 0.0f, workers).is_ok());
  }
  EXPECT_EQ(device.f32, host.f32);
  EXPECT_EQ(device.bf16, host.bf16);
  EXPECT_EQ(copies->bytes_in, 0u);
  EXPECT_EQ(copies->bytes_out, fragment_bytes);
}

TEST(Layout, AFailedCopyFailsTheCallNamingTheRangeAndABodyNeverRunsOnStaleValues) {
  runtime::WorkerPool workers(2);
  Params params;
  auto copies = std::make_shared<HostPlaysDevice>();
  auto layout = params.layout(/*device_bf16=*/false, copies);
  ASSERT_TRUE(layout.is_ok());
  copies->in_error = Status(LH_ERR_IO, "the copy engine fell over");
  bool ran = false;
  Status s = layout->update(
      1, [&](size_t, std::span<float>) { ran = true; }, workers);
  EXPECT_EQ(s.code(), LH_ERR_IO);
  EXPECT_NE(s.message().find("parameter range 0 from the device"), std::string::npos)
      << s.message();
  EXPECT_FALSE(ran);
  copies->in_error = Status::ok();
  copies->out_error = Status(LH_ERR_IO, "the copy engine fell over again");
  std::vector<float> global(layout->fragment_size(1), 2.0f);
  s = layout->merge(1, global, 0.0f, workers);
  EXPECT_EQ(s.code(), LH_ERR_IO);
  EXPECT_NE(s.message().find("parameter range 0 to the device"), std::string::npos) << s.message();
  EXPECT_EQ(params.bf16[25], quant::f32_to_bf16(2.0f));  // the host piece was written
}

TEST(Layout, DeviceRangesNeedCopiesAndAMirror) {
  Params params;
  auto without = params.layout(false, nullptr);
  ASSERT_FALSE(without.is_ok());
  EXPECT_EQ(without.status().code(), LH_ERR_INVALID_ARGUMENT);
  auto copies = std::make_shared<HostPlaysDevice>();
  copies->mirror_error = Status(LH_ERR_UNSUPPORTED, "no CUDA device: none here");
  auto no_mirror = params.layout(false, copies);
  ASSERT_FALSE(no_mirror.is_ok());
  EXPECT_EQ(no_mirror.status().code(), LH_ERR_UNSUPPORTED);
  EXPECT_NE(no_mirror.status().message().find("no CUDA device"), std::string::npos);
}

}  // namespace
}  // namespace longhaul::sync
