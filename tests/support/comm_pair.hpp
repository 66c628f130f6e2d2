// Two communicators of one group for tests of the public C++ API: an in-process master and two
// communicators on loopback (a ring of two, both admitted in one epoch), as a fixture (CommPair:
// `a_` and `b_`) or as a value (a test that needs two groups), and a way to run a collective on
// both at once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <longhaul/longhaul.hpp>

namespace longhaul::testing {

// An in-process master on loopback and two communicators admitted together in one epoch (a ring
// of two). Throws std::runtime_error when the second is not admitted.
struct Group {
  std::unique_ptr<longhaul::Master> master;
  std::unique_ptr<longhaul::Communicator> a;
  std::unique_ptr<longhaul::Communicator> b;
};

// `full_mesh`: the communicators' option (the direct schedule needs it at every group size).
inline Group connect_group_of_two(bool full_mesh = false) {
  using namespace std::chrono_literals;
  Group g;
  g.master =
      std::make_unique<longhaul::Master>(longhaul::MasterOptions{.listen_address = "127.0.0.1:0"});
  g.master->run();
  const std::string address = "127.0.0.1:" + std::to_string(g.master->port());
  const longhaul::CommunicatorOptions options{
      .master_address = address, .listen_address = "127.0.0.1:0", .full_mesh = full_mesh};
  g.a = std::make_unique<longhaul::Communicator>(options);
  g.b = std::make_unique<longhaul::Communicator>(options);
  g.a->connect();
  // b is admitted once a reaches update_topology.
  auto joined = std::async(std::launch::async, [&g] { g.b->connect(); });
  for (int i = 0; i < 1000 && !g.a->peers_pending(); ++i) std::this_thread::sleep_for(5ms);
  if (!g.a->peers_pending()) throw std::runtime_error("the second peer never asked to join");
  g.a->update_topology();
  joined.get();
  if (g.a->group_world_size() != 2) throw std::runtime_error("the group did not form of two");
  return g;
}

// Runs `on_a` and `on_b` at once (a collective needs both peers), rethrowing either's error.
template <class A, class B>
void on_both(A on_a, B on_b) {
  auto other = std::async(std::launch::async, on_b);
  on_a();
  other.get();
}

class CommPair : public ::testing::Test {
 protected:
  void SetUp() override {
    Group g = connect_group_of_two(full_mesh_);
    master_ = std::move(g.master);
    a_ = std::move(g.a);
    b_ = std::move(g.b);
  }

  template <class A, class B>
  static void both(A on_a, B on_b) {
    on_both(std::move(on_a), std::move(on_b));
  }

  // Set in a derived fixture's constructor: both communicators link as a full mesh.
  bool full_mesh_ = false;
  std::unique_ptr<longhaul::Master> master_;
  std::unique_ptr<longhaul::Communicator> a_;
  std::unique_ptr<longhaul::Communicator> b_;
};

}  // namespace longhaul::testing
