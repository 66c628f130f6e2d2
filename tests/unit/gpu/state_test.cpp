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
