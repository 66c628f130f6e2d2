// Two peers of one group for the GPU tests: an in-process master, a "GPU" communicator and a
// "CPU" communicator on loopback (ring of two), and a way to run a collective on both at once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <longhaul/longhaul.hpp>

#include "tests/unit/gpu/device_buffer.hpp"

namespace longhaul::gpu::testing {

class TwoPeers : public ::testing::Test {
 protected:
  void SetUp() override {
    LH_SKIP_WITHOUT_CUDA();
    using namespace std::chrono_literals;
    master_ = std::make_unique<longhaul::Master>(
        longhaul::MasterOptions{.listen_address = "127.0.0.1:0"});
    master_->run();
    const std::string address = "127.0.0.1:" + std::to_string(master_->port());
    const longhaul::CommunicatorOptions options{.master_address = address,
                                                .listen_address = "127.0.0.1:0"};
    gpu_ = std::make_unique<longhaul::Communicator>(options);
    cpu_ = std::make_unique<longhaul::Communicator>(options);
    gpu_->connect();
    auto joined = std::async(std::launch::async, [this] { cpu_->connect(); });
    for (int i = 0; i < 1000 && !gpu_->peers_pending(); ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(gpu_->peers_pending());
    gpu_->update_topology();
    joined.get();
    ASSERT_EQ(gpu_->group_world_size(), 2);
  }

  // Runs `on_gpu` and `on_cpu` at once (a collective needs both peers), rethrowing either's error.
  template <class A, class B>
  static void both(A on_gpu, B on_cpu) {
    auto other = std::async(std::launch::async, on_cpu);
    on_gpu();
    other.get();
  }

  std::unique_ptr<longhaul::Master> master_;
  std::unique_ptr<longhaul::Communicator> gpu_;
  std::unique_ptr<longhaul::Communicator> cpu_;
};

}  // namespace longhaul::gpu::testing
