// Shared state in CUDA device memory beside a CPU peer: a device tensor hashes as the same bytes in
// host memory do, a GPU peer adopts a CPU peer's state into device memory, and serves its own
// (written on the device after registration) to a CPU peer. Skipped, with the reason, where there
// is no CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <longhaul/longhaul.h>

#include "gpu/pinned_pool.hpp"
#include "gpu/state_shadows.hpp"
#include "state/block_hash.hpp"
#include "tests/unit/gpu/two_peers.hpp"

namespace {

using longhaul::gpu::testing::DeviceBuffer;

constexpr std::size_t kCount =
    (3u << 20) / sizeof(float) + 1000;  // a little over three 1 MiB blocks

std::vector<float> values(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(kCount);
  for (float& v : x) v = u(rng);
  return x;
}

struct StateDeleter {
  void operator()(lh_state* s) const { lh_state_destroy(s); }
};
using State = std::unique_ptr<lh_state, StateDeleter>;

State make_state(void* weights, std::uint64_t* step) {
  lh_state* s = nullptr;
  EXPECT_EQ(lh_state_create(&s), LH_OK);
  EXPECT_EQ(lh_state_add_tensor(s, "weights", weights, kCount, LH_DTYPE_F32), LH_OK)
      << lh_state_last_error(s);
  EXPECT_EQ(lh_state_add_tensor(s, "step", step, 1, LH_DTYPE_U64), LH_OK);
  return State(s);
}

std::uint64_t hash_of(lh_state* s) {
  std::uint64_t h = 0;
  EXPECT_EQ(lh_state_hash(s, &h), LH_OK) << lh_state_last_error(s);
  return h;
}

TEST(GpuStateHash, ADeviceTensorHashesAsItsBytesInHostMemory) {
  LH_SKIP_WITHOUT_CUDA();
  std::vector<float> host = values(1);
  DeviceBuffer device(kCount * sizeof(float));
  std::uint64_t step_a = 7, step_b = 7;
  State on_device = make_state(device.as<void>(), &step_a);
  State on_host = make_state(host.data(), &step_b);
  device.upload(host);  // after registration: the hash reads the device as it is now
  EXPECT_EQ(hash_of(on_device.get()), hash_of(on_host.get()));
  host[12345] += 1.0f;
  EXPECT_NE(hash_of(on_device.get()), hash_of(on_host.get()));
}

// A shadow is refreshed block by block: only blocks whose device hash changed cross PCIe, the
// shadow always ends equal to the device, and a push leaves nothing to pull. The shadow is a
// pooled slot larger than the tensor, and only the tensor's bytes are copied.
TEST(GpuStateShadows, OnlyChangedBlocksCrossPcieAndTheShadowEndsEqualToTheDevice) {
  LH_SKIP_WITHOUT_CUDA();
  const std::size_t mib = longhaul::state::kBlockBytes, bytes = 5 * mib + 1000;
  { ASSERT_TRUE(longhaul::gpu::acquire_pinned(6 * mib).is_ok()); }  // back to the pool, kept
  auto shadow = longhaul::gpu::StateShadows::make(bytes);
  ASSERT_TRUE(shadow.is_ok());
  EXPECT_GT((*shadow)->size(), bytes);
  std::vector<float> host(bytes / sizeof(float));
  std::mt19937 rng(7);
  for (float& v : host) v = static_cast<float>(rng());
  DeviceBuffer device(host.size() * sizeof(float));
  device.upload(host);
  const std::size_t tensor_bytes = host.size() * sizeof(float);
  longhaul::gpu::StateShadows shadows;
  shadows.keep(device.as<void>(), tensor_bytes, *shadow);
  const auto shadow_equals_device = [&] {
    const std::vector<float> now = device.download<float>();
    return std::memcmp((*shadow)->data(), now.data(), tensor_bytes) == 0;
  };

  ASSERT_TRUE(shadows.pull().is_ok());
  EXPECT_EQ(shadows.bytes_pulled(), tensor_bytes);  // the first pull takes everything
  EXPECT_TRUE(shadow_equals_device());
  ASSERT_TRUE(shadows.pull().is_ok());
  EXPECT_EQ(shadows.bytes_pulled(), tensor_bytes);  // nothing changed: nothing copied

  // One value in block 2 and one in the short last block change on the device.
  const float changed = -1.0f;
  for (std::size_t at : {2 * mib + 40, 5 * mib + 8})
    ASSERT_EQ(cudaMemcpy(device.as<std::byte>() + at, &changed, 4, cudaMemcpyHostToDevice),
              cudaSuccess);
  ASSERT_TRUE(shadows.pull().is_ok());
  EXPECT_EQ(shadows.bytes_pulled(), tensor_bytes + mib + (tensor_bytes - 5 * mib));
  EXPECT_TRUE(shadow_equals_device());

  // A sync wrote block 0 of the shadow: the push takes it to the device, and a pull copies none.
  std::memset((*shadow)->data() + 100, 0x5A, 64);
  ASSERT_TRUE(shadows.push().is_ok());
  EXPECT_TRUE(shadow_equals_device());
  const std::uint64_t before = shadows.bytes_pulled();
  ASSERT_TRUE(shadows.pull().is_ok());
  EXPECT_EQ(shadows.bytes_pulled(), before);

  // The device's block hashes are the CPU's of the same bytes.
  auto on_device = shadows.device_block_hashes();
  ASSERT_TRUE(on_device.is_ok());
  const auto& hashes = on_device->at((*shadow)->data());
  ASSERT_EQ(hashes.size(), longhaul::state::block_count(tensor_bytes));
  for (std::size_t i = 0; i < hashes.size(); ++i)
    EXPECT_EQ(hashes[i],
              longhaul::state::hash_block({(*shadow)->data() + longhaul::state::block_offset(i),
                                           longhaul::state::block_length(tensor_bytes, i)}));
}

class GpuState : public longhaul::gpu::testing::TwoPeers {
 protected:
  void sync_both(lh_state* gpu_state, lh_sync_strategy gpu_strategy, lh_state* cpu_state,
                 lh_sync_strategy cpu_strategy, lh_sync_info* gpu_info) {
    both(
        [&] {
          ASSERT_EQ(lh_sync_state(gpu().get(), gpu_state, gpu_strategy, gpu_info), LH_OK)
              << lh_state_last_error(gpu_state);
        },
        [&] {
          ASSERT_EQ(lh_sync_state(cpu().get(), cpu_state, cpu_strategy, nullptr), LH_OK)
              << lh_state_last_error(cpu_state);
        });
  }
};

TEST_F(GpuState, AGpuPeerAdoptsTheCpuPeersStateIntoDeviceMemory) {
  const std::vector<float> theirs = values(2);
  std::vector<float> cpu_weights = theirs;
  DeviceBuffer device(kCount * sizeof(float));
  device.upload(values(3));
  std::uint64_t gpu_step = 0, cpu_step = 41;
  State gpu_state = make_state(device.as<void>(), &gpu_step);
  State cpu_state = make_state(cpu_weights.data(), &cpu_step);

  lh_sync_info info{};
  sync_both(gpu_state.get(), LH_SYNC_RECEIVE_ONLY, cpu_state.get(), LH_SYNC_ENFORCE_POPULAR, &info);
  EXPECT_GE(info.blocks_fetched, 4u);
  const std::vector<float> got = device.download<float>();
  EXPECT_EQ(std::memcmp(got.data(), theirs.data(), kCount * sizeof(float)), 0);
  EXPECT_EQ(gpu_step, 41u);
  EXPECT_EQ(hash_of(gpu_state.get()), hash_of(cpu_state.get()));
}

TEST_F(GpuState, ACpuPeerReceivesWhatTheGpuPeerWroteOnTheDevice) {
  DeviceBuffer device(kCount * sizeof(float));
  std::vector<float> cpu_weights = values(4);
  std::uint64_t gpu_step = 9, cpu_step = 0;
  State gpu_state = make_state(device.as<void>(), &gpu_step);
  State cpu_state = make_state(cpu_weights.data(), &cpu_step);
  const std::vector<float> ours = values(5);
  device.upload(ours);  // written on the device after registration, as a trainer does

  sync_both(gpu_state.get(), LH_SYNC_ENFORCE_POPULAR, cpu_state.get(), LH_SYNC_RECEIVE_ONLY,
            nullptr);
  EXPECT_EQ(std::memcmp(cpu_weights.data(), ours.data(), kCount * sizeof(float)), 0);
  EXPECT_EQ(cpu_step, 9u);
  const std::vector<float> still = device.download<float>();
  EXPECT_EQ(std::memcmp(still.data(), ours.data(), kCount * sizeof(float)), 0);
}

}  // namespace
