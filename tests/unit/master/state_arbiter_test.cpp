// The master's state-sync rounds driven directly with Membership and a recording outbox (wired as
// the server wires them): a source lost while fetchers still use it is named to exactly those
// fetchers (STATE_SOURCE_LOST), and the round still completes; a member that waits in
// update_topology aborts a round still collecting reports (LH_ERR_ABORTED to every reporter, and
// to every later report until the new epoch), not a planned one; a member lost before it
// reports is no longer waited for; the deadlines follow the group once it has synced, and a member
// left out or refused in 3 of its last 8 syncs is evicted (issue 50, item 4).
#include "master/state_arbiter.hpp"

#include <gtest/gtest.h>

#include "master_fixture.hpp"
#include "state/block_hash.hpp"

namespace longhaul::master {
namespace {

class StateArbiterTest : public MasterFixture {
 protected:
  StateArbiterTest() {
    out.on_peer_forgotten = [this](PeerId who) { arbiter.on_peer_gone(who); };
  }

  // `id` calls update_topology; what Membership tells the outbox reaches the arbiter as the server
  // forwards it.
  void update_topology(PeerId id) {
    const size_t before = out.reconfiguring.size();
    ASSERT_TRUE(m.on_update_topology(id, m.epoch()).is_ok());
    for (size_t i = before; i < out.reconfiguring.size(); ++i)
      arbiter.on_group_reconfiguring(out.reconfiguring[i]);
  }

  static constexpr uint32_t kMaxTensors = 3;
  StateArbiter arbiter{out, m, kMaxTensors};

  // One tensor "w" of two blocks whose hashes are (content, content + 1).
  Status report(PeerId id, uint64_t content, wire::SyncStrategy strategy, uint64_t revision = 0) {
    wire::TensorReport t{"w", 0, 2 * state::kBlockBytes / 4, {content, content + 1}, {0}};
    return arbiter.on_report(
        id, wire::StateReportMsg{
                m.epoch(), static_cast<uint32_t>(state::kBlockBytes), revision, strategy, {t}});
  }
  // Every OK plan sent so far answers STATE_DONE.
  void all_done() {
    for (auto& [id, plan] : out.take<wire::StatePlanMsg>())
      if (plan.code == LH_OK) {
        ASSERT_TRUE(arbiter.on_done(id, wire::StateDoneMsg{plan.epoch, LH_OK, ""}).is_ok());
      }
  }
};

TEST_F(StateArbiterTest, ALostSourceIsNamedToTheFetchersThatStillUseIt) {
  const auto ids = form(4);  // 1..3 hold content 10; 4 (receive-only) and nobody else fetches
  for (size_t i = 0; i < 3; ++i)
    ASSERT_TRUE(report(ids[i], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  ASSERT_TRUE(report(ids[3], 20, wire::SyncStrategy::kReceiveOnly).is_ok());
  auto plans = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(plans.size(), 4u);
  for (auto& [to, plan] : plans) {
    EXPECT_EQ(plan.code, LH_OK) << plan.reason;
    EXPECT_EQ(plan.sources.size(), to == ids[3] ? 3u : 0u);
  }

  m.drop_peer(ids[1], "missed 3 heartbeats");
  auto lost = out.take<wire::StateSourceLostMsg>();
  ASSERT_EQ(lost.size(), 1u) << "only the fetcher is told";
  EXPECT_EQ(lost[0].first, ids[3]);
  EXPECT_EQ(lost[0].second.epoch, plans[0].second.epoch);
  EXPECT_EQ(lost[0].second.peer_id, ids[1]);
  EXPECT_TRUE(out.take<wire::StateCompleteMsg>().empty()) << "the fetcher is still at work";

  // Every peer with an OK plan answers STATE_DONE (the sources at once: they fetch nothing).
  for (PeerId id : {ids[0], ids[2], ids[3]})
    ASSERT_TRUE(arbiter.on_done(id, wire::StateDoneMsg{plans[0].second.epoch, LH_OK, ""}).is_ok());
  auto complete = out.take<wire::StateCompleteMsg>();
  EXPECT_EQ(complete.size(), 3u) << "peers 1, 3 and 4 are released";
  m.drop_peer(ids[0], "connection lost");
  EXPECT_TRUE(out.take<wire::StateSourceLostMsg>().empty()) << "no sync runs any more";
}

// A report naming more tensors than the master's limit is refused (the server drops its sender)
// with the limit and the flag that sets it; the others' round goes on without it.
TEST_F(StateArbiterTest, AReportOfMoreTensorsThanTheLimitIsRefusedWithTheLimit) {
  const auto ids = form(2);
  std::vector<wire::TensorReport> tensors;
  for (uint32_t i = 0; i <= kMaxTensors; ++i)
    tensors.push_back({"t" + std::to_string(i), 0, 1, {i}, {0}});
  const Status refused = arbiter.on_report(
      ids[0], wire::StateReportMsg{m.epoch(), static_cast<uint32_t>(state::kBlockBytes), 0,
                                   wire::SyncStrategy::kEnforcePopular, tensors});
  EXPECT_EQ(refused.code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(refused.message().find("limit of 3 (longhaul-master --max-state-tensors)"),
            std::string::npos)
      << refused.message();
  m.drop_peer(ids[0], "refused");
  ASSERT_TRUE(report(ids[1], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  EXPECT_EQ(out.take<wire::StatePlanMsg>().size(), 1u);
}

TEST_F(StateArbiterTest, ALostFetcherIsNobodysSource) {
  const auto ids = form(3);
  ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  ASSERT_TRUE(report(ids[1], 20, wire::SyncStrategy::kReceiveOnly).is_ok());
  ASSERT_TRUE(report(ids[2], 30, wire::SyncStrategy::kReceiveOnly).is_ok());
  ASSERT_EQ(out.take<wire::StatePlanMsg>().size(), 3u);
  m.drop_peer(ids[1], "connection lost");
  EXPECT_TRUE(out.take<wire::StateSourceLostMsg>().empty());
  // The source itself goes: the remaining fetcher is told, once.
  m.drop_peer(ids[0], "missed 3 heartbeats");
  auto lost = out.take<wire::StateSourceLostMsg>();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, ids[2]);
  EXPECT_EQ(lost[0].second.peer_id, ids[0]);
}

TEST_F(StateArbiterTest, AMemberWaitingInUpdateTopologyAbortsASyncStillCollectingReports) {
  const auto ids = form(3);
  join();  // a peer waits to be admitted: update_topology has work to do
  out.sent.clear();
  out.reconfiguring.clear();
  ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  ASSERT_TRUE(report(ids[1], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  EXPECT_TRUE(out.take<wire::StatePlanMsg>().empty()) << "the round waits for the third report";

  update_topology(ids[2]);
  ASSERT_EQ(out.reconfiguring, std::vector<uint32_t>{0});
  auto plans = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(plans.size(), 2u) << "each reporter is told, the waiting member is not";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(plans[i].first, ids[i]);
    EXPECT_EQ(plans[i].second.code, LH_ERR_ABORTED);
    EXPECT_EQ(plans[i].second.epoch, m.epoch());
    EXPECT_NE(plans[i].second.reason.find("reconfiguring"), std::string::npos);
    EXPECT_TRUE(plans[i].second.fetches.empty());
  }

  // A retry before update_topology is refused at once, not collected into a new round.
  ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  plans = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].first, ids[0]);
  EXPECT_EQ(plans[0].second.code, LH_ERR_ABORTED);

  // The others come to update_topology; the new epoch admits the joiner and its sync is planned.
  update_topology(ids[0]);
  update_topology(ids[1]);
  all_ready();
  out.sent.clear();
  std::vector<PeerId> members;
  for (const auto& [id, member] : m.members()) members.push_back(id);
  ASSERT_EQ(members.size(), 4u);
  for (PeerId id : members)
    ASSERT_TRUE(report(id, id == members.back() ? 20 : 10,
                       id == members.back() ? wire::SyncStrategy::kReceiveOnly
                                            : wire::SyncStrategy::kEnforcePopular)
                    .is_ok());
  plans = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(plans.size(), 4u);
  for (auto& [to, plan] : plans) EXPECT_EQ(plan.code, LH_OK) << plan.reason;
}

TEST_F(StateArbiterTest, APlannedSyncIsNotAbortedByAReconfiguration) {
  const auto ids = form(3);
  join();
  out.sent.clear();
  out.reconfiguring.clear();
  ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  ASSERT_TRUE(report(ids[1], 20, wire::SyncStrategy::kReceiveOnly).is_ok());
  // The third is send-only and loses the tie to the lowest peer id: refused, it returns and goes
  // to update_topology while the others still transfer.
  ASSERT_TRUE(report(ids[2], 30, wire::SyncStrategy::kSendOnly).is_ok());
  auto plans = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].second.code, LH_OK);
  EXPECT_EQ(plans[1].second.code, LH_OK);
  EXPECT_EQ(plans[2].second.code, LH_ERR_STATE_MISMATCH);

  update_topology(ids[2]);
  EXPECT_EQ(out.reconfiguring, std::vector<uint32_t>{0});
  EXPECT_TRUE(out.take<wire::StatePlanMsg>().empty()) << "a planned sync completes on its own";
  for (PeerId id : {ids[0], ids[1]})
    ASSERT_TRUE(arbiter.on_done(id, wire::StateDoneMsg{m.epoch(), LH_OK, ""}).is_ok());
  auto complete = out.take<wire::StateCompleteMsg>();
  ASSERT_EQ(complete.size(), 2u);
  EXPECT_EQ(complete[0].first, ids[0]);
  EXPECT_EQ(complete[1].first, ids[1]);
  EXPECT_EQ(arbiter.group_revision(0), std::optional<uint64_t>(1));
}

TEST_F(StateArbiterTest, AMemberLostBeforeItReportsIsNoLongerWaitedFor) {
  const auto ids = form(3);
  ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  ASSERT_TRUE(report(ids[1], 20, wire::SyncStrategy::kReceiveOnly).is_ok());
  EXPECT_TRUE(out.take<wire::StatePlanMsg>().empty());
  m.drop_peer(ids[2], "connection lost");
  auto plans = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(plans.size(), 2u) << "the survivors are planned without the lost member";
  for (auto& [to, plan] : plans) EXPECT_EQ(plan.code, LH_OK) << plan.reason;
  EXPECT_EQ(plans[1].second.fetches.size(), 1u);
}

// A member that reports in time but never confirms its fetch misses every sync's fetch deadline:
// its in-time report must not make it less of an outlier, so the third such sync evicts it.
TEST_F(StateArbiterTest, AFetcherThatNeverConfirmsIsEvictedAtItsThirdMissedSync) {
  using namespace std::chrono_literals;
  const auto ids = form(2);
  auto t = StateArbiter::Clock::now();
  std::vector<std::pair<PeerId, Status>> evicted;
  for (int sync = 0; sync < 3; ++sync) {
    ASSERT_TRUE(evicted.empty()) << "evicted at sync " << sync;
    ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
    ASSERT_TRUE(report(ids[1], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
    const auto plans = out.take<wire::StatePlanMsg>();
    ASSERT_EQ(plans.size(), 2u);
    ASSERT_TRUE(arbiter.on_done(ids[0], wire::StateDoneMsg{m.epoch(), LH_OK, ""}).is_ok());
    EXPECT_TRUE(arbiter.expire(t, 1000ms).empty());  // the fetch phase is seen
    t += 2000ms;
    evicted = arbiter.expire(t, 1000ms);
    EXPECT_EQ(out.take<wire::StateCompleteMsg>().size(), 1u) << "the one that confirmed";
  }
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].first, ids[1]);
  EXPECT_EQ(evicted[0].second.code(), LH_ERR_TIMEOUT);
  EXPECT_NE(evicted[0].second.message().find("outlier of 3 of its last 8 state syncs"),
            std::string::npos)
      << evicted[0].second.message();
}

// Once the group has synced, its report deadline is what the group needs (here the 2 s floor),
// not the round timeout: a member silent for 2 s is left out and its late report refused.
TEST_F(StateArbiterTest, TheReportDeadlineFollowsTheGroupOnceItHasSynced) {
  using namespace std::chrono_literals;
  const auto ids = form(3);
  for (PeerId id : ids) ASSERT_TRUE(report(id, 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  all_done();
  ASSERT_EQ(out.take<wire::StateCompleteMsg>().size(), 3u);

  ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  ASSERT_TRUE(report(ids[1], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  const auto t = StateArbiter::Clock::now();
  EXPECT_TRUE(arbiter.expire(t, 30000ms).empty());
  EXPECT_TRUE(arbiter.expire(t + 1999ms, 30000ms).empty());
  EXPECT_TRUE(out.take<wire::StatePlanMsg>().empty()) << "still within the floor";
  EXPECT_TRUE(arbiter.expire(t + 2000ms, 30000ms).empty()) << "one outlier does not evict";
  auto plans = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(plans.size(), 2u) << "planned without the silent member";
  ASSERT_TRUE(report(ids[2], 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  auto late = out.take<wire::StatePlanMsg>();
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].second.code, LH_ERR_TIMEOUT);
}

// A report the election refuses (here: ahead of the group's revision) is no part in the sync: the
// member is that sync's outlier, and the third such sync of its last eight evicts it.
TEST_F(StateArbiterTest, AMemberWhoseReportsAreRefusedIsEvictedAtTheThird) {
  using namespace std::chrono_literals;
  const auto ids = form(3);
  std::vector<std::pair<PeerId, Status>> evicted;
  for (int sync = 0; sync < 3; ++sync) {
    ASSERT_TRUE(evicted.empty()) << "evicted at sync " << sync;
    ASSERT_TRUE(report(ids[0], 10, wire::SyncStrategy::kEnforcePopular, sync).is_ok());
    ASSERT_TRUE(report(ids[1], 10, wire::SyncStrategy::kEnforcePopular, sync).is_ok());
    ASSERT_TRUE(report(ids[2], 10, wire::SyncStrategy::kEnforcePopular, 1000).is_ok());
    all_done();
    ASSERT_EQ(out.take<wire::StateCompleteMsg>().size(), 2u);
    evicted = arbiter.expire(StateArbiter::Clock::now(), 30000ms);
  }
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].first, ids[2]);
  EXPECT_NE(evicted[0].second.message().find("its report was refused (revision 1000 is ahead"),
            std::string::npos)
      << evicted[0].second.message();
}

// A member left out that syncs again on its own (lh_sync_state once more) finds the others gone to
// their work: they are not late for its retry, only it was late for theirs.
TEST_F(StateArbiterTest, MembersLeftOutOfARetryByTheLateOnesAreNotOutliers) {
  using namespace std::chrono_literals;
  const auto ids = form(2);
  for (PeerId id : ids) ASSERT_TRUE(report(id, 10, wire::SyncStrategy::kEnforcePopular).is_ok());
  all_done();
  auto t = StateArbiter::Clock::now();
  std::vector<std::pair<PeerId, Status>> evicted;
  for (int sync = 0; sync < 3; ++sync) {
    ASSERT_TRUE(evicted.empty()) << "evicted at sync " << sync;
    // ids[0] syncs; ids[1] comes 2 s late and is left out, then retries alone.
    for (PeerId id : ids) {
      ASSERT_TRUE(report(id, 10, wire::SyncStrategy::kEnforcePopular).is_ok());
      for (auto at : {t, t + 2000ms}) {
        auto e = arbiter.expire(at, 30000ms);
        evicted.insert(evicted.end(), e.begin(), e.end());
      }
      t += 2000ms;
      all_done();
    }
  }
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].first, ids[1]) << "only the late one";
}

// When the election refuses everyone (a group of receive-only members) nobody stands out.
TEST_F(StateArbiterTest, AllReportsRefusedMakesNobodyAnOutlier) {
  const auto ids = form(2);
  std::vector<std::pair<PeerId, Status>> evicted;
  for (int sync = 0; sync < 4; ++sync) {
    for (PeerId id : ids) ASSERT_TRUE(report(id, 10, wire::SyncStrategy::kReceiveOnly).is_ok());
    EXPECT_EQ(out.take<wire::StatePlanMsg>().size(), 2u);
    auto e = arbiter.expire(StateArbiter::Clock::now(), std::chrono::milliseconds(30000));
    evicted.insert(evicted.end(), e.begin(), e.end());
  }
  EXPECT_TRUE(evicted.empty());
}

}  // namespace
}  // namespace longhaul::master
