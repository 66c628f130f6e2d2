// The fake master itself (tests/support/fake_group.hpp): the protocol's answers the other fake
// tests count on (docs/protocol.md), each checked on its own.
#include "fake_group.hpp"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "state/registry.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until `n` calls are blocked in the world.
void await_blocked(const FakeWorld& world, size_t n) {
  for (int i = 0; i < 5000 && world.blocked_calls() < n; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_GE(world.blocked_calls(), n);
}

TEST(FakeWorld, UpdateTopologyWithNothingToDoAnswersAtOnce) {
  FakeWorld world;
  auto m = world.form(2);
  EXPECT_EQ(world.epoch(), 1u);
  EXPECT_EQ(m[1]->view().ring, (std::vector<PeerId>{1, 2}));
  EXPECT_EQ(m[1]->view().rank, 1u);
  EXPECT_FALSE(m[0]->peers_pending());
  ASSERT_TRUE(m[0]->update_topology());
  EXPECT_EQ(world.unchanged_answers(), 1u);
  EXPECT_EQ(world.epoch(), 1u);
}

TEST(FakeWorld, TheFirstJoinerOfAnEmptyWorldIsAdmittedAtOnce) {
  FakeWorld world;
  FakeMember& m = world.add();
  ASSERT_TRUE(m.connect());
  EXPECT_EQ(m.view().epoch, 1u);
  EXPECT_EQ(m.ring_view().size, 1u);
}

TEST(FakeWorld, AJoinerIsAdmittedOnceEveryMemberCallsUpdateTopology) {
  FakeWorld world;
  auto m = world.form(2);
  FakeMember& joiner = world.add();
  EXPECT_TRUE(m[0]->peers_pending());
  EXPECT_FALSE(world.admitted(joiner.id()));
  in_parallel(3,
              [&](size_t i) { EXPECT_TRUE(i < 2 ? m[i]->update_topology() : joiner.connect()); });
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 3}));
  EXPECT_EQ(joiner.view().epoch, 2u);
  EXPECT_EQ(joiner.ring_view().size, 3u);
  EXPECT_FALSE(m[1]->peers_pending());
}

TEST(FakeWorld, DecideWaitsForEveryMemberOfTheEpoch) {
  FakeWorld world;
  auto m = world.form(2);
  std::thread first([&] {
    auto d = m[0]->decide({.ok = true});
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->all_succeeded);
    EXPECT_EQ(d->members, (std::vector<PeerId>{1, 2}));
  });
  await_blocked(world, 1);
  EXPECT_EQ(world.decisions(true), 0u);  // member 2 has not reported
  auto d = m[1]->decide({.ok = true});
  first.join();
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->all_succeeded);
  EXPECT_EQ(world.decisions(true), 1u);
}

TEST(FakeWorld, AFailedReportDecidesAtOnceAndEndsTheEpoch) {
  FakeWorld world;
  auto m = world.form(2);
  auto d = m[0]->decide({.ok = false});  // no wait for member 2
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->all_succeeded);
  EXPECT_TRUE(m[1]->peers_pending());
  auto late = m[1]->decide({.ok = true});
  ASSERT_TRUE(late);
  EXPECT_FALSE(late->all_succeeded);  // the decision is final
  in_parallel(2, [&](size_t i) { EXPECT_TRUE(m[i]->update_topology(false)); });
  EXPECT_EQ(world.epoch(), 2u);  // re-formed with the same members
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2}));
}

TEST(FakeWorld, AKilledMembersBlockedCallEndsAndItsLinksFail) {
  FakeWorld world;
  auto m = world.form(3);
  auto link = world.link(2, 1);
  ASSERT_TRUE(link);
  std::thread victim([&] {
    auto d = m[0]->decide({.ok = true});
    EXPECT_EQ(d.status().code(), LH_ERR_PEER_LOST);
  });
  await_blocked(world, 1);
  world.kill(1);
  victim.join();
  EXPECT_EQ(link->failure().code(), LH_ERR_PEER_LOST);
  EXPECT_TRUE(m[1]->peers_pending());
  auto op = m[0]->allreduce({});
  EXPECT_EQ(op.status().code(), LH_ERR_PEER_LOST);
  in_parallel(2, [&](size_t i) { EXPECT_TRUE(m[i + 1]->update_topology()); });
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{2, 3}));
}

TEST(FakeWorld, DestroyingTheWorldEndsEveryBlockedCall) {
  auto world = std::make_unique<FakeWorld>();
  auto m = world->form(2);
  std::atomic<int> code{0};
  std::thread waiter([&] { code = m[0]->decide({.ok = true}).status().code(); });
  await_blocked(*world, 1);
  world.reset();
  waiter.join();
  EXPECT_EQ(code.load(), LH_ERR_CLOSED);
}

TEST(FakeWorld, AWaitPastTheLimitFailsTheTestLoudlyAndBreaksTheWorld) {
  FakeWorldOptions options;
  options.wait_limit = 50ms;
  FakeWorld world(options);
  auto m = world.form(2);
  Status status;
  EXPECT_NONFATAL_FAILURE(status = m[0]->decide({.ok = true}).status(), "waited more than 50 ms");
  EXPECT_EQ(status.code(), LH_ERR_INTERNAL);
  EXPECT_EQ(m[1]->update_topology().code(), LH_ERR_INTERNAL);  // at once
}

TEST(FakeWorld, ACollectiveRunningPastTheLimitFailsTheTestAndIsAborted) {
  FakeWorldOptions options;
  options.wait_limit = 50ms;
  FakeWorld world(options);
  auto m = world.form(2);
  std::vector<float> data(100, 1.0f);
  collective::AllReduceSpec spec;
  spec.input = spec.output = data.data();
  spec.count = data.size();
  Status status;
  EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS(
      {
        auto op = m[0]->allreduce(spec);  // member 2 never joins it
        ASSERT_TRUE(op);
        status = (*op)->wait();
      },
      "ran more than 50 ms");
  EXPECT_EQ(status.code(), LH_ERR_TIMEOUT);
}

TEST(FakeWorld, ARemovedMembersListenersHearTheReasonOnce) {
  FakeWorld world;
  auto m = world.form(2);
  std::vector<Status> heard;
  m[0]->add_failure_listener([&](const Status& why) { heard.push_back(why); });
  world.remove(1, Status(LH_ERR_PROTOCOL, "removed by the test"));
  world.remove(1, Status(LH_ERR_PROTOCOL, "twice"));
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].message(), "removed by the test");
  EXPECT_EQ(m[0]->failure().code(), LH_ERR_PROTOCOL);
  EXPECT_TRUE(m[0]->peers_pending());
}

// Each member's registry holds one tensor filled with `values[i]`; a sync of all of them.
std::vector<std::vector<float>> sync_all(FakeWorld& world, const std::vector<float>& values,
                                         std::vector<Status>* statuses = nullptr,
                                         std::vector<uint64_t>* revisions = nullptr) {
  auto m = world.form(values.size());
  std::vector<std::vector<float>> data(values.size());
  std::vector<state::Registry> registries(values.size());
  std::vector<Status> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    data[i].assign(1000, values[i]);
    EXPECT_TRUE(registries[i].add_tensor("w", data[i].data(), data[i].size(), quant::DType::kF32));
  }
  in_parallel(values.size(), [&](size_t i) {
    state::SyncResult result;
    out[i] = m[i]->sync(registries[i], wire::SyncStrategy::kEnforcePopular, &result);
  });
  if (statuses) *statuses = out;
  if (revisions)
    for (auto& r : registries) revisions->push_back(r.revision());
  return data;
}

TEST(FakeWorld, AStateSyncCopiesThePopularContentAtTheNextRevision) {
  FakeWorld world;
  std::vector<Status> statuses;
  std::vector<uint64_t> revisions;
  auto data = sync_all(world, {1.0f, 2.0f, 2.0f}, &statuses, &revisions);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(statuses[i]) << statuses[i].to_string();
    EXPECT_EQ(data[i], std::vector<float>(1000, 2.0f)) << "member " << i;
    EXPECT_EQ(revisions[i], 1u);
  }
}

TEST(FakeWorld, AStateSyncTieGoesToTheLowestPeerId) {
  FakeWorld world;
  auto data = sync_all(world, {3.0f, 1.0f, 2.0f});
  for (const auto& d : data) EXPECT_EQ(d, std::vector<float>(1000, 3.0f));
}

TEST(FakeWorld, AMemberWaitingInUpdateTopologyRefusesTheStateSync) {
  FakeWorld world;
  auto m = world.form(2);
  FakeMember& joiner = world.add();
  std::vector<float> data(10, 1.0f);
  state::Registry registry;
  ASSERT_TRUE(registry.add_tensor("w", data.data(), data.size(), quant::DType::kF32));
  std::thread waiting([&] { EXPECT_TRUE(m[0]->update_topology()); });
  state::SyncResult result;
  // Before or after member 1 waits, the sync ends ABORTED (refused, or its round aborted).
  EXPECT_EQ(m[1]->sync(registry, wire::SyncStrategy::kEnforcePopular, &result).code(),
            LH_ERR_ABORTED);
  EXPECT_TRUE(m[1]->update_topology());
  EXPECT_TRUE(joiner.connect());
  waiting.join();
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 3}));
}

}  // namespace
}  // namespace longhaul::testing
