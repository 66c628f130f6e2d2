// The sync engine on the rails of nodes (docs/protocol.md, "Node agreement"): the master daemon,
// and in this process nodes of two rails (rail r of every node is group r), one engine per rail
// on its own thread, and a barrier per node after every inner step standing in for the trainer's
// intra-node collective (FSDP's all-gather). Node c's rail 1 leaves at the step that launches
// round 2: group 0 applies the round (node c's rail 0 is still in it) and group 1 loses it, and
// the rails of nodes a and b must still re-form at the same step, or the rail in update_topology
// waits for its sibling while the sibling waits for it at the node's barrier. And a master
// SIGKILLed while the rails are about to reach an agreement point: they report it again to the
// restarted master.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.hpp>

#include "cluster.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSteps = 8;
constexpr uint32_t kSyncEvery = 2;
constexpr uint64_t kLeaveStep = 4;  // the step that launches round 2
constexpr size_t kParameters = 256;
constexpr auto kBarrierTimeout = 30s;

// A barrier of a node's rails whose wait gives up (false) after a timeout, so that a hang shows
// as a failed test rather than a stuck one.
class NodeBarrier {
 public:
  explicit NodeBarrier(size_t rails) : rails_(rails) {}
  bool arrive_and_wait() {
    std::unique_lock lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == rails_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    return cv_.wait_for(lock, kBarrierTimeout, [&] { return generation_ != generation; });
  }

 private:
  const size_t rails_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t arrived_ = 0;
  uint64_t generation_ = 0;
};

struct Rail {
  std::string node;
  uint32_t rail = 0;
  std::unique_ptr<Communicator> comm;
  std::vector<float> parameters = std::vector<float>(kParameters);
  // What the rail's thread ended with (read once `finished` is set).
  std::atomic<bool> finished{false};
  std::atomic<uint64_t> steps_done{0};
  std::optional<lh_status> error;
  std::string error_message;
  lh_sync_stats stats{};
  uint64_t hash = 0;
};

class NodeRails : public ::testing::Test {
 protected:
  // Nodes a and b of two rails, and with `node_c` a third one. With
  // `journal` the master keeps one, and the communicators wait for it when it is lost (else a
  // killed master releases every call).
  void start(bool node_c, bool journal = false) {
    journal_ = journal;
    std::vector<std::string> args;
    if (journal) args = {"--journal", dir_.path() + "/master.journal"};
    cluster_ = std::make_unique<Cluster>(args);
    for (const char* node : {"a", "b"})
      for (uint32_t r = 0; r < 2; ++r) add(node, r, 2);
    if (node_c)
      for (uint32_t r = 0; r < 2; ++r) add("c", r, 2);
    admit_all();
  }

  void add(const std::string& node, uint32_t group, uint32_t rails) {
    auto rail = std::make_unique<Rail>();
    rail->node = node;
    rail->rail = group;
    rail->comm = std::make_unique<Communicator>(
        CommunicatorOptions{.master_address = cluster_->master_address(),
                            .peer_group = group,
                            .listen_address = "127.0.0.1:0",
                            .node = node,
                            .node_rail = rails > 1 ? group : 0,
                            .node_rails = rails,
                            .master_reconnect_timeout_ms = journal_ ? 60000u : 0u});
    rails_.push_back(std::move(rail));
  }

  // Whoever completes first is admitted at once (nobody is active), the others once the admitted
  // rails re-form.
  void admit_all() {
    std::vector<std::future<void>> connecting;
    for (auto& rail : rails_)
      connecting.push_back(std::async(std::launch::async, [&c = *rail->comm] { c.connect(); }));
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    auto connected = [&](size_t i) {
      return connecting[i].wait_for(0s) == std::future_status::ready;
    };
    while (std::chrono::steady_clock::now() < deadline) {
      std::vector<Communicator*> active;
      bool all = true, pending = false;
      for (size_t i = 0; i < rails_.size(); ++i) {
        if (!connected(i)) {
          all = false;
          continue;
        }
        active.push_back(rails_[i]->comm.get());
        pending = pending || rails_[i]->comm->peers_pending();
      }
      if (all) break;
      // A rail the master admitted whose connect() has not returned yet (its thread not run yet,
      // under load) is in the round too: without it the others would wait for it forever.
      int64_t admitted = 0;
      for (auto* comm : active) admitted = std::max(admitted, comm->world_size());
      if (!pending || static_cast<int64_t>(active.size()) < admitted) {
        std::this_thread::sleep_for(10ms);
        continue;
      }
      // Every active rail calls update_topology at once: the round needs all of them.
      std::vector<std::future<void>> updates;
      for (auto* comm : active)
        updates.push_back(std::async(std::launch::async, [comm] { comm->update_topology(); }));
      for (auto& u : updates) u.get();
    }
    for (auto& c : connecting) c.get();
    for (auto& rail : rails_)
      ASSERT_EQ(rail->comm->group_world_size(), static_cast<int64_t>(rails_.size() / 2));
  }

  // One rail's training: an inner step, the engine's step, the node's barrier. Node c's rail 1
  // leaves instead of launching round 2.
  void train(Rail& rail, NodeBarrier& barrier, lh_loss_policy policy) {
    run(rail, barrier, policy);
    rail.finished.store(true);
  }
  void run(Rail& rail, NodeBarrier& barrier, lh_loss_policy policy) {
    for (size_t i = 0; i < kParameters; ++i)
      rail.parameters[i] = 0.01f * static_cast<float>(i % 17);
    SyncEngineOptions options;
    options.add(rail.parameters);
    options.c.sync_every = kSyncEvery;
    options.c.on_loss = policy;
    options.c.delay = delay_;
    try {
      std::optional<SyncEngine> engine(std::in_place, *rail.comm, options);
      for (uint64_t step = 1; step <= kSteps; ++step) {
        if (rail.node == "c" && rail.rail == 1 && step == kLeaveStep) {
          // Gracefully: node c departs, and its rail 0 may still finish its collectives, so
          // group 0's round 2 is applied (a death would evict node c from both groups at once).
          rail.comm->leave("the test's departure");
          return;
        }
        for (size_t i = 0; i < kParameters; ++i)
          rail.parameters[i] -= 0.001f * static_cast<float>((i + rail.rail + step) % 5);
        engine->step();
        rail.steps_done = step;
        if (!barrier.arrive_and_wait()) {
          rail.error = LH_ERR_TIMEOUT;
          rail.error_message = "the node's barrier timed out at step " + std::to_string(step);
          hung_.store(true);
          return;
        }
        if (step == hold_after_) {
          ++held_;
          released_.wait();
        }
      }
      engine->close();
      rail.stats = engine->stats();
      rail.hash = engine->hash();
    } catch (const Error& e) {
      rail.error = e.status();
      rail.error_message = e.what();
    }
  }

  // Trains every rail on its own thread; `during` runs on this one meanwhile. A hung rail would
  // wait in update_topology; stopping the master releases it (at once, or once the reconnect
  // timeout has passed).
  void train_all(lh_loss_policy policy, const std::function<void()>& during = {}) {
    std::vector<std::unique_ptr<NodeBarrier>> barriers;
    std::vector<std::thread> threads;
    for (size_t n = 0; n < 2; ++n) barriers.push_back(std::make_unique<NodeBarrier>(2));
    barriers.push_back(std::make_unique<NodeBarrier>(1));  // node c's rails, untied: one leaves
    for (size_t i = 0; i < rails_.size(); ++i)
      threads.emplace_back(
          [this, i, &barriers, policy] { train(*rails_[i], *barriers[i / 2], policy); });
    if (during) during();
    const auto running = [this] {
      for (auto& r : rails_)
        if (!r->finished.load()) return true;
      return false;
    };
    for (int i = 0; i < 900 && !hung_.load() && running(); ++i) std::this_thread::sleep_for(100ms);
    if (running()) hung_.store(true);
    if (hung_.load()) cluster_->master().kill(SIGKILL);
    for (auto& t : threads) t.join();
  }

  // Every rail of nodes a and b ended all its steps, and each group ends with one θ_g.
  void expect_the_nodes_trained_together() {
    for (const char* node : {"a", "b"})
      for (uint32_t r = 0; r < 2; ++r) {
        const Rail& x = rail(node, r);
        SCOPED_TRACE(std::string(node) + std::to_string(r));
        EXPECT_FALSE(x.error) << x.error_message;
        EXPECT_EQ(x.steps_done.load(), kSteps);
      }
    EXPECT_FALSE(hung_.load());
    EXPECT_EQ(rail("a", 0).hash, rail("b", 0).hash);
    EXPECT_EQ(rail("a", 1).hash, rail("b", 1).hash);
  }

  Rail& rail(const std::string& node, uint32_t r) {
    for (auto& x : rails_)
      if (x->node == node && x->rail == r) return *x;
    throw std::logic_error("no such rail");
  }

  TempDir dir_;
  std::unique_ptr<Cluster> cluster_;
  bool journal_ = false;
  uint32_t delay_ = 0;  // the engines' τ
  // With hold_after_, every rail waits after that step until release_ is set.
  uint64_t hold_after_ = 0;
  std::atomic<size_t> held_{0};
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::vector<std::unique_ptr<Rail>> rails_;
  std::atomic<bool> hung_{false};
};

class NodeRailsLoss : public NodeRails, public ::testing::WithParamInterface<lh_loss_policy> {};

TEST_P(NodeRailsLoss, RailsOfANodeReFormTogetherWhenTheirGroupsDisagreeAboutARound) {
  start(/*node_c=*/true);
  train_all(GetParam());
  expect_the_nodes_trained_together();
  const Rail& c0 = rail("c", 0);
  ASSERT_TRUE(c0.error) << "node c's rail 0 is removed when it asks to go on";
  EXPECT_EQ(*c0.error, LH_ERR_NODE_EVICTED) << c0.error_message;
  if (HasFailure()) return;

  // Group 0 applied every round; group 1 lost round 2 to the departure, then retried it without
  // node c or dropped it.
  const uint64_t rounds = kSteps / kSyncEvery;
  for (const char* node : {"a", "b"}) {
    EXPECT_EQ(rail(node, 0).stats.rounds_applied, rounds);
    EXPECT_EQ(rail(node, 0).stats.retries, 0u);
    if (GetParam() == LH_LOSS_RETRY) {
      EXPECT_EQ(rail(node, 1).stats.rounds_applied, rounds);
      EXPECT_EQ(rail(node, 1).stats.retries, 1u);
    } else {
      EXPECT_EQ(rail(node, 1).stats.rounds_applied, rounds - 1);
      EXPECT_EQ(rail(node, 1).stats.rounds_dropped, 1u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LossPolicies, NodeRailsLoss,
                         ::testing::Values(LH_LOSS_RETRY, LH_LOSS_DROP),
                         [](const ::testing::TestParamInfo<lh_loss_policy>& policy) {
                           return std::string(policy.param == LH_LOSS_RETRY ? "Retry" : "Drop");
                         });

// A master restarted while the rails train: the rails reach step 4's agreement point (the
// admission point) while it is away, report it once they have rejoined the new master, and the
// new master answers each node once both its rails have.
TEST_F(NodeRails, RailsWaitingForTheirNodeReportAgainToARestartedMaster) {
  start(/*node_c=*/false, /*journal=*/true);
  hold_after_ = 3;  // step 4 starts at an agreement point (the admission point)
  train_all(LH_LOSS_RETRY, [this] {
    for (int i = 0; i < 3000 && held_.load() < rails_.size(); ++i)
      std::this_thread::sleep_for(10ms);
    ASSERT_EQ(held_.load(), rails_.size());
    cluster_->master().kill(SIGKILL);
    release_.set_value();  // the rails reach the point and wait for the master meanwhile
    std::this_thread::sleep_for(500ms);
    ASSERT_TRUE(cluster_->restart_master());
  });
  expect_the_nodes_trained_together();
  for (auto& r : rails_)
    EXPECT_EQ(r->stats.rounds_applied + r->stats.rounds_dropped, kSteps / kSyncEvery);
}

// Streaming DiLoCo's overlap (τ = 1): the round launched at the last step is still in flight when
// the rails close, and close() settles it, an agreement point like any other.
TEST_F(NodeRails, RailsClosingWithARoundInFlightSettleItTogether) {
  delay_ = 1;
  start(/*node_c=*/false);
  train_all(LH_LOSS_RETRY);
  expect_the_nodes_trained_together();
  for (auto& r : rails_) EXPECT_EQ(r->stats.rounds_applied, kSteps / kSyncEvery);
}

}  // namespace
}  // namespace longhaul::testing
