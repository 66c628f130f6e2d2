// The node group (node/node_group.hpp) with its ranks as threads: each node's ranks share a real
// shared-memory local group (node/shm_local_group.hpp), and each rail is a group of a fake master
// (tests/support/fake_group.hpp). The hierarchical all-reduce sums over every rank of every node;
// a rail's failed attempt is retried by every rank from the node's sum; a dead rank takes its node
// out and the others go on; a node that joins is admitted at the start of the call.
#include "node/node_group.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <functional>
#include <string>
#include <vector>

#include "fake_group.hpp"
#include "node/shm_local_group.hpp"

namespace longhaul::node {
namespace {

using namespace std::chrono_literals;
using peer::PeerId;
using testing::FakeMember;
using testing::FakeWorld;
using testing::in_parallel;

constexpr size_t kCount = 1000;

std::string local_group_name(size_t node) {
  static std::atomic<int> n{0};
  return "/lh-fake-node-" + std::to_string(getpid()) + "-" + std::to_string(n++) + "-" +
         std::to_string(node);
}

// What a rank does with its node group; its status.
using RankBody = std::function<Status(size_t node, uint32_t rail, NodeGroup& group)>;

// Runs every rank of `nodes` (nodes[k][r]: rail r of node k) on its own thread: it forms its
// node's local group, binds it to its rail's member, and runs `body`. Every rank keeps its local
// group until all are done, as a trainer's ranks do between calls: a rank that destroys it while a
// sibling still checks the group's failure at the end of a failed call would end that sibling's
// node.
std::vector<std::vector<Status>> run_ranks(const std::vector<std::vector<FakeMember*>>& nodes,
                                           const RankBody& body) {
  const uint32_t rails = static_cast<uint32_t>(nodes[0].size());
  std::vector<std::string> names;
  for (size_t k = 0; k < nodes.size(); ++k) names.push_back(local_group_name(k));
  std::vector<std::vector<Status>> out(nodes.size(), std::vector<Status>(rails));
  std::barrier done(static_cast<std::ptrdiff_t>(nodes.size() * rails));
  in_parallel(nodes.size() * rails, [&](size_t i) {
    const size_t k = i / rails;
    const uint32_t r = static_cast<uint32_t>(i % rails);
    ShmLocalGroupOptions o;
    o.name = names[k];
    o.rank = r;
    o.size = rails;
    o.slot_bytes = 4096;
    o.timeout = 10s;
    auto local = ShmLocalGroup::create(o);
    if (!local) {
      out[k][r] = local.status();
      done.arrive_and_wait();
      return;
    }
    FakeMember& m = *nodes[k][r];
    NodeGroup group(m, m, m, std::move(*local));
    out[k][r] = body(k, r, group);
    done.arrive_and_wait();
  });
  return out;
}

// Rank r of node k contributes kCount values k·rails + r + 1, in place in `data[k][r]`.
struct Data {
  std::vector<std::vector<std::vector<float>>> v;
  explicit Data(size_t nodes, size_t rails) : v(nodes, std::vector<std::vector<float>>(rails)) {
    for (size_t k = 0; k < nodes; ++k)
      for (size_t r = 0; r < rails; ++r)
        v[k][r].assign(kCount, static_cast<float>(k * rails + r + 1));
  }
  RankBody allreduce(uint32_t max_attempts, quant::ReduceOp op = quant::ReduceOp::kSum) {
    return [this, max_attempts, op](size_t k, uint32_t r, NodeGroup& group) {
      collective::AllReduceSpec spec;
      spec.input = spec.output = v[k][r].data();
      spec.count = kCount;
      spec.op = op;
      return group.allreduce(spec, max_attempts);
    };
  }
  bool holds(size_t k, size_t r, float value) const {
    return v[k][r] == std::vector<float>(kCount, value);
  }
};

TEST(NodeGroupFake, SumsOverEveryRankOfEveryNode) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  Data d(2, 2);
  auto s = run_ranks(nodes, d.allreduce(1));
  for (size_t k = 0; k < 2; ++k)
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_TRUE(s[k][r]) << s[k][r].to_string();
      EXPECT_TRUE(d.holds(k, r, 10.0f)) << "node " << k << " rank " << r;
    }
}

TEST(NodeGroupFake, AveragesOverEveryContribution) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  Data d(2, 2);
  auto s = run_ranks(nodes, d.allreduce(1, quant::ReduceOp::kAvg));
  for (size_t k = 0; k < 2; ++k)
    for (size_t r = 0; r < 2; ++r) EXPECT_TRUE(d.holds(k, r, 2.5f)) << s[k][r].to_string();
}

TEST(NodeGroupFake, ARailsFailedAttemptIsRetriedByEveryRankFromTheNodesSum) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  world.fail_reports(nodes[1][1]->id());  // rail 1 fails its first attempt, rail 0 succeeds
  Data d(2, 2);
  auto s = run_ranks(nodes, d.allreduce(2));
  for (size_t k = 0; k < 2; ++k)
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_TRUE(s[k][r]) << s[k][r].to_string();
      EXPECT_TRUE(d.holds(k, r, 10.0f)) << "node " << k << " rank " << r << " reduced twice";
    }
  EXPECT_EQ(world.epoch(), 2u);          // both rails re-formed, in one epoch
  EXPECT_EQ(world.decisions(true), 3u);  // rail 0's first attempt and each rail's retry
}

TEST(NodeGroupFake, AllAttemptsFailingFailsEveryRankRetryablyWithItsInputIntact) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  world.fail_reports(nodes[0][0]->id(), 2);
  Data d(2, 2);
  auto s = run_ranks(nodes, d.allreduce(2));
  for (size_t k = 0; k < 2; ++k)
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(s[k][r].code(), LH_ERR_PEER_LOST) << s[k][r].to_string();
      EXPECT_TRUE(d.holds(k, r, static_cast<float>(k * 2 + r + 1)));
      EXPECT_TRUE(nodes[k][r]->failure());  // nobody was lost: call update_topology, retry
    }
}

TEST(NodeGroupFake, AKilledRankEvictsItsNodeAndTheOtherNodesGoOn) {
  FakeWorld world;
  auto nodes = world.form_nodes(3, 2);
  Data d(3, 2);
  const PeerId victim = nodes[2][1]->id();
  auto reduce = d.allreduce(3);
  auto s = run_ranks(nodes, [&](size_t k, uint32_t r, NodeGroup& group) {
    if (nodes[k][r]->id() == victim) {
      world.kill(victim);  // its sibling hears of the eviction and leaves its local group
      return Status::ok();
    }
    return reduce(k, r, group);
  });
  EXPECT_EQ(s[2][0].code(), LH_ERR_NODE_EVICTED) << s[2][0].to_string();
  for (size_t k = 0; k < 2; ++k)
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_TRUE(s[k][r]) << s[k][r].to_string();
      EXPECT_TRUE(d.holds(k, r, 10.0f)) << "node " << k << " rank " << r;
    }
  EXPECT_EQ(world.ring(0), (std::vector<PeerId>{1, 3}));
  EXPECT_EQ(world.ring(1), (std::vector<PeerId>{2, 4}));
}

TEST(NodeGroupFake, ANodeThatJoinsIsAdmittedAtTheStartOfTheCallOnEveryRank) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  nodes.push_back({&world.add(0, {"late", 0, 2}), &world.add(1, {"late", 1, 2})});
  EXPECT_TRUE(nodes[0][0]->peers_pending());  // a complete node is admissible
  Data d(3, 2);
  auto reduce = d.allreduce(1);
  auto s = run_ranks(nodes, [&](size_t k, uint32_t r, NodeGroup& group) {
    if (k == 2) LH_RETURN_IF_ERROR(nodes[k][r]->connect());
    return reduce(k, r, group);
  });
  for (size_t k = 0; k < 3; ++k)
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_TRUE(s[k][r]) << s[k][r].to_string();
      EXPECT_TRUE(d.holds(k, r, 21.0f)) << "node " << k << " rank " << r;
    }
  EXPECT_EQ(world.ring(1), (std::vector<PeerId>{2, 4, 6}));
}

TEST(NodeGroupFake, AnIncompleteNodeWaitsAndRaisesNoFlag) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  FakeMember& half = world.add(0, {"half", 0, 2});
  EXPECT_FALSE(nodes[0][0]->peers_pending());
  Data d(2, 2);
  auto s = run_ranks(nodes, d.allreduce(1));
  for (size_t k = 0; k < 2; ++k)
    for (size_t r = 0; r < 2; ++r) EXPECT_TRUE(d.holds(k, r, 10.0f)) << s[k][r].to_string();
  EXPECT_FALSE(world.admitted(half.id()));
  EXPECT_EQ(world.epoch(), 1u);
}

}  // namespace
}  // namespace longhaul::node
