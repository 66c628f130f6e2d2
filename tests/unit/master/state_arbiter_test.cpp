// The master's state-sync rounds driven directly with Membership and a recording outbox (wired as
// the server wires them): a source lost while fetchers still use it is named to exactly those
// fetchers (STATE_SOURCE_LOST), and the round still completes.
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

  StateArbiter arbiter{out, m};

  // One tensor "w" of two blocks whose hashes are (content, content + 1).
  Status report(PeerId id, uint64_t content, wire::SyncStrategy strategy) {
    wire::TensorReport t{"w", 0, 2 * state::kBlockBytes / 4, {content, content + 1}, {0}};
    return arbiter.on_report(
        id, wire::StateReportMsg{
                m.epoch(), static_cast<uint32_t>(state::kBlockBytes), 0, strategy, {t}});
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

}  // namespace
}  // namespace longhaul::master
