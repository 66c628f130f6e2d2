// The sync engine over parameters in CUDA device memory: a GPU peer and a CPU peer train one θ_g
// together, and every value they end with (θ_g, each peer's parameters, f32 and bf16) is bit for
// bit what the same run gives when both peers' parameters are in host memory. Skipped, with the
// reason, where there is no CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <longhaul/longhaul.hpp>

#include "comm_pair.hpp"
#include "quant/half.hpp"
#include "tests/unit/gpu/device_buffer.hpp"

namespace {

using longhaul::gpu::testing::DeviceBuffer;
using longhaul::testing::on_both;

constexpr size_t kF32 = 300'001, kBf16 = 70'003;  // odd sizes: no piece ends on a block
constexpr int kSteps = 24;

// One peer's parameters (an f32 range and a bf16 range), in host or device memory, and an inner
// step that pulls them towards the peer's own target. The host vectors are the trainer's view;
// a device peer uploads them before each engine step and downloads what the engine merged.
class Trainer {
 public:
  Trainer(int peer, bool on_device)
      : peer_(peer),
        on_device_(on_device),
        f32_(kF32),
        bf16_(kBf16),
        device_f32_(on_device ? kF32 * 4 : 4),
        device_bf16_(on_device ? kBf16 * 2 : 4) {
    for (size_t i = 0; i < kF32; ++i) f32_[i] = static_cast<float>(i % 1000) * 0.001f;
    for (size_t i = 0; i < kBf16; ++i)
      bf16_[i] = longhaul::quant::f32_to_bf16(static_cast<float>(i % 100) * 0.01f);
    upload();
  }

  longhaul::SyncEngineOptions options() {
    longhaul::SyncEngineOptions o;
    o.ranges.push_back({on_device_ ? device_f32_.as<void>() : f32_.data(), kF32, LH_DTYPE_F32});
    o.ranges.push_back({on_device_ ? device_bf16_.as<void>() : bf16_.data(), kBf16, LH_DTYPE_BF16});
    // Streaming: two fragments, each holding part of both ranges, applied a step after launch.
    o.pieces = {{0, 0, 0, 100'000},
                {1, 0, 100'000, kF32 - 100'000},
                {1, 1, 0, 30'000},
                {0, 1, 30'000, kBf16 - 30'000}};
    o.c.fragments = 2;
    o.c.sync_every = 4;
    o.c.delay = 1;
    o.c.codec = LH_CODEC_U8;
    return o;
  }

  void inner_step(int t) {
    download();
    const float target = static_cast<float>(peer_ + 1) * 0.5f + 0.01f * static_cast<float>(t);
    for (float& x : f32_) x += 0.05f * (target - x);
    for (uint16_t& x : bf16_) {
      const float v = longhaul::quant::bf16_to_f32(x);
      x = longhaul::quant::f32_to_bf16(v + 0.05f * (target - v));
    }
    upload();
  }

  // What the trainer sees now (the device's bytes for a device peer).
  std::vector<float> f32() {
    download();
    return f32_;
  }
  std::vector<uint16_t> bf16() {
    download();
    return bf16_;
  }

 private:
  void upload() {
    if (!on_device_) return;
    device_f32_.upload(f32_);
    device_bf16_.upload(bf16_);
  }
  void download() {
    if (!on_device_) return;
    f32_ = device_f32_.download<float>();
    bf16_ = device_bf16_.download<uint16_t>();
  }

  int peer_;
  bool on_device_;
  std::vector<float> f32_;
  std::vector<uint16_t> bf16_;
  DeviceBuffer device_f32_, device_bf16_;
};

struct Outcome {
  uint64_t hash[2];
  std::vector<float> global[2];  // θ_g of each fragment, as seen by peer a
  std::vector<float> f32[2];
  std::vector<uint16_t> bf16[2];
  uint64_t memory_a = 0;
};

// Peer a's parameters on the device or not; peer b's always in host memory.
Outcome train(bool a_on_device) {
  longhaul::testing::Group group = longhaul::testing::connect_group_of_two();
  Trainer ta(0, a_on_device), tb(1, false);
  std::unique_ptr<longhaul::SyncEngine> ea, eb;
  on_both([&] { ea = std::make_unique<longhaul::SyncEngine>(*group.a, ta.options()); },
          [&] { eb = std::make_unique<longhaul::SyncEngine>(*group.b, tb.options()); });
  for (int t = 1; t <= kSteps; ++t)
    on_both(
        [&] {
          ta.inner_step(t);
          ea->step();
        },
        [&] {
          tb.inner_step(t);
          eb->step();
        });
  on_both([&] { ea->close(); }, [&] { eb->close(); });
  Outcome o;
  o.hash[0] = ea->hash();
  o.hash[1] = eb->hash();
  o.global[0] = ea->global(0, 100'000 + (kBf16 - 30'000));
  o.global[1] = ea->global(1, (kF32 - 100'000) + 30'000);
  o.f32[0] = ta.f32();
  o.f32[1] = tb.f32();
  o.bf16[0] = ta.bf16();
  o.bf16[1] = tb.bf16();
  o.memory_a = ea->stats().memory_bytes;
  return o;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(GpuSyncEngine, AGpuPeerAndACpuPeerEndBitForBitAsTwoCpuPeersDo) {
  LH_SKIP_WITHOUT_CUDA();
  const Outcome gpu = train(/*a_on_device=*/true);
  const Outcome cpu = train(/*a_on_device=*/false);
  EXPECT_EQ(gpu.hash[0], gpu.hash[1]);
  EXPECT_EQ(gpu.hash[0], cpu.hash[0]);
  for (int f = 0; f < 2; ++f) EXPECT_TRUE(same_bits(gpu.global[f], cpu.global[f])) << f;
  for (int p = 0; p < 2; ++p) {
    EXPECT_TRUE(same_bits(gpu.f32[p], cpu.f32[p])) << "peer " << p;
    EXPECT_EQ(gpu.bf16[p], cpu.bf16[p]) << "peer " << p;
  }
  // The training moved the parameters (the comparison is not between two untouched copies).
  EXPECT_FALSE(same_bits(gpu.f32[0], Trainer(0, false).f32()));
  // The GPU peer holds one pinned mirror of the larger fragment's device bytes beside the rest.
  const size_t mirror = ((kF32 - 100'000) * 4 + 63) / 64 * 64 + (30'000 * 2 + 63) / 64 * 64;
  EXPECT_EQ(gpu.memory_a, cpu.memory_a + mirror);
}

TEST(GpuSyncEngine, HostMemoryDeclaredCudaFailsTheStartWithTheDevicesReason) {
  LH_SKIP_WITHOUT_CUDA();
  longhaul::testing::Group group = longhaul::testing::connect_group_of_two();
  std::vector<float> host(1000, 1.0f);
  lh_param_range range{host.data(), host.size(), LH_DTYPE_F32};
  lh_sync_engine_options o;
  lh_sync_engine_options_init(&o);
  o.ranges = &range;
  o.range_count = 1;
  o.memory = LH_MEMORY_CUDA;
  lh_sync_engine* engine = nullptr;
  // The copy of host memory declared device memory fails in the CUDA runtime, on the one peer
  // that declared it, before anything is sent.
  const lh_status s = lh_sync_engine_start(group.a->get(), &o, &engine);
  EXPECT_NE(s, LH_OK);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(lh_comm_last_error(group.a->get())).find("parameter range 0"),
            std::string::npos)
      << lh_comm_last_error(group.a->get());
}

}  // namespace
