// Two communicators of one group for tests of the public C++ API: an in-process master and two
// communicators `a_` and `b_` on loopback (a ring of two, both admitted in one epoch), and a way to
// run a collective on both at once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <longhaul/longhaul.hpp>

namespace longhaul::testing {

class CommPair : public ::testing::Test {
 protected:
  void SetUp() override {
    using namespace std::chrono_literals;
    master_ = std::make_unique<longhaul::Master>(
        longhaul::MasterOptions{.listen_address = "127.0.0.1:0"});
    master_->run();
    const std::string address = "127.0.0.1:" + std::to_string(master_->port());
    const longhaul::CommunicatorOptions options{.master_address = address,
                                                .listen_address = "127.0.0.1:0"};
    a_ = std::make_unique<longhaul::Communicator>(options);
    b_ = std::make_unique<longhaul::Communicator>(options);
    a_->connect();
    // b is admitted once a reaches update_topology.
    auto joined = std::async(std::launch::async, [this] { b_->connect(); });
    for (int i = 0; i < 1000 && !a_->peers_pending(); ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(a_->peers_pending());
    a_->update_topology();
    joined.get();
    ASSERT_EQ(a_->group_world_size(), 2);
  }

  // Runs `on_a` and `on_b` at once (a collective needs both peers), rethrowing either's error.
  template <class A, class B>
  static void both(A on_a, B on_b) {
    auto other = std::async(std::launch::async, on_b);
    on_a();
    other.get();
  }

  std::unique_ptr<longhaul::Master> master_;
  std::unique_ptr<longhaul::Communicator> a_;
  std::unique_ptr<longhaul::Communicator> b_;
};

}  // namespace longhaul::testing
