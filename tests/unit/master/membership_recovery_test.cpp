// A restarted master rebuilding its run from the members' REJOIN reports (membership.hpp,
// "Recovery"), and the batch decisions they carry (batch_arbiter.hpp), driven directly.
#include <gtest/gtest.h>

#include "master/batch_arbiter.hpp"
#include "master_fixture.hpp"

namespace longhaul::master {
namespace {

class RecoveryTest : public MasterFixture {
 protected:
  BatchArbiter batch{out, m};

  void SetUp() override {
    out.on_group_epoch_failed = [this](uint32_t g) { batch.on_group_epoch_failed(g); };
    m.begin_recovery();
  }
};

TEST_F(RecoveryTest, MembersRejoinAndTheRingIsReformedInANewerEpoch) {
  const std::vector<PeerId> ring{3, 5, 9};
  for (PeerId id : ring) {
    EXPECT_FALSE(m.everyone_rejoined());
    ASSERT_TRUE(m.add_rejoined(rejoin_report(id, 7, ring)).is_ok());
  }
  EXPECT_TRUE(m.everyone_rejoined());
  EXPECT_TRUE(out.take<wire::TopologyMsg>().empty()) << "no round while recovering";
  for (PeerId id : ring) ASSERT_TRUE(m.on_update_topology(id, 7).is_ok());
  m.finish_recovery();
  EXPECT_FALSE(m.recovering());
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 3u);
  EXPECT_GT(proposals[0].second.epoch, 7u) << "every epoch after a restart is newer";
  for (auto& [id, p] : proposals) ASSERT_TRUE(m.on_links_ready(id, p.epoch, {}).is_ok());
  EXPECT_EQ(out.take<wire::EpochCommitMsg>().size(), 3u);
  EXPECT_EQ(m.active_count(), 3u);
  // New peers get ids above every rejoined one.
  EXPECT_GT(m.allocate_id(), 9u);
}

TEST_F(RecoveryTest, RecoveryWaitsForOtherGroupsAndWholeNodes) {
  // Two groups of one: each ring is complete on its own, but the epoch had two members.
  auto one = rejoin_report(1, 4, {1}, 0);
  one.world = 2;
  ASSERT_TRUE(m.add_rejoined(one).is_ok());
  EXPECT_FALSE(m.everyone_rejoined()) << "group 1's member is not back";
  auto other = rejoin_report(2, 4, {2}, 1);
  other.world = 2;
  ASSERT_TRUE(m.add_rejoined(other).is_ok());
  EXPECT_TRUE(m.everyone_rejoined());
}

// While recovering, the rings are not rebuilt yet: a rejoined member still shows its group's
// shape to a REGISTER (docs/protocol.md, "Claims").
TEST_F(RecoveryTest, ARejoinedRailShowsItsGroupsShapeToARegistration) {
  auto rail = rejoin_report(1, 4, {1}, 0);
  rail.node = NodeClaim{"a", 0, 2, 0, "127.0.0.1"};
  rail.world = 2;
  ASSERT_TRUE(m.add_rejoined(rail).is_ok());
  const Status lone = m.check_node_claim(NodeClaim{"", 0, 1, 0, "127.0.0.2"});
  EXPECT_EQ(lone.code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lone.message().find("peer group 0 holds rail 0 of a node of 2 rails (peer 1)"),
            std::string::npos)
      << lone.message();
  EXPECT_TRUE(m.check_node_claim(NodeClaim{"", 0, 1, 3, "127.0.0.2"}).is_ok());
}

TEST_F(RecoveryTest, AMemberWhoseViewConflictsWithItsGroupIsToldToResync) {
  const std::vector<PeerId> ring{1, 2, 3};
  ASSERT_TRUE(m.add_rejoined(rejoin_report(1, 4, ring)).is_ok());
  ASSERT_TRUE(m.add_rejoined(rejoin_report(2, 4, ring)).is_ok());
  ASSERT_TRUE(m.add_rejoined(rejoin_report(3, 2, {3, 1, 2})).is_ok());  // a stale epoch and ring
  m.finish_recovery();
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].first, 3u);
  EXPECT_EQ(out.disconnected[0].second.code(), LH_ERR_STATE_MISMATCH);
  EXPECT_NE(out.disconnected[0].second.message().find("resync"), std::string::npos);
  EXPECT_EQ(m.active_count(), 2u);
}

TEST_F(RecoveryTest, AGroupSplitByALostCommitAgreesWithItself) {
  // The master died between its EPOCH_COMMITs: peer 1 entered epoch 5, peers 2 and 3 were still
  // linking for it. Nobody conflicts.
  const std::vector<PeerId> old_ring{2, 3}, new_ring{1, 2, 3};
  auto linking = [&](PeerId id) {
    auto r = rejoin_report(id, 4, old_ring);
    r.proposed_epoch = 5;
    r.proposed_ring = new_ring;
    return r;
  };
  ASSERT_TRUE(m.add_rejoined(linking(2)).is_ok());
  ASSERT_TRUE(m.add_rejoined(linking(3)).is_ok());
  ASSERT_TRUE(m.add_rejoined(rejoin_report(1, 5, new_ring)).is_ok());
  m.finish_recovery();
  EXPECT_TRUE(out.disconnected.empty());
  EXPECT_EQ(m.active_count(), 3u);
  EXPECT_EQ(m.epoch(), 5u);
}

TEST_F(RecoveryTest, ARejoinTakingAnIdOfThisMasterIsRefused) {
  m.raise_floors(0, 0);
  const PeerId fresh = join();
  const Status s = m.add_rejoined(rejoin_report(fresh, 3, {fresh}));
  EXPECT_EQ(s.code(), LH_ERR_STATE_MISMATCH);
}

TEST_F(RecoveryTest, ANodeThatDidNotComeBackWholeIsEvicted) {
  auto rail = [&](PeerId id, uint32_t r) {
    auto rep = rejoin_report(id, 3, {id}, r);
    rep.node = NodeClaim{"n0", r, 2, r, "127.0.0.1"};
    return rep;
  };
  ASSERT_TRUE(m.add_rejoined(rail(1, 0)).is_ok());  // rail 1 (peer 2) died meanwhile
  m.finish_recovery();
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].second.code(), LH_ERR_NODE_EVICTED);
}

TEST_F(RecoveryTest, BatchDecisionsTheOldMasterMadeAreKeptAndOthersDecidedAfresh) {
  const std::vector<PeerId> ring{1, 2, 3};
  for (PeerId id : ring) ASSERT_TRUE(m.add_rejoined(rejoin_report(id, 6, ring)).is_ok());
  // Peer 1 heard that attempt 2 failed before the master died; 2 and 3 still wait for it.
  batch.record_decision(0, 6, 2, false);
  ASSERT_TRUE(batch.on_report(2, {6, 2, true}).is_ok());
  ASSERT_TRUE(batch.on_report(3, {6, 2, true}).is_ok());
  EXPECT_TRUE(out.take<wire::BatchDecisionMsg>().empty()) << "held until recovery ends";
  m.finish_recovery();
  batch.finish_recovery();
  auto decisions = out.take<wire::BatchDecisionMsg>();
  ASSERT_EQ(decisions.size(), 2u);
  for (auto& [to, d] : decisions) EXPECT_FALSE(d.ok) << "peer " << to;
  // A fresh attempt of the same epoch is decided by the usual rule.
  for (PeerId id : ring) ASSERT_TRUE(batch.on_report(id, {6, 3, true}).is_ok());
  decisions = out.take<wire::BatchDecisionMsg>();
  ASSERT_EQ(decisions.size(), 3u);
  for (auto& [to, d] : decisions) EXPECT_TRUE(d.ok);
}

}  // namespace
}  // namespace longhaul::master
