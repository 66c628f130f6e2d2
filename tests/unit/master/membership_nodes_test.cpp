// Nodes as failure units (membership_nodes.cpp, nodes.cpp): a node's rails are admitted together
// once all registered, and evicted together when one goes; bad claims are refused with a reason.
#include <gtest/gtest.h>

#include "master_fixture.hpp"

namespace longhaul::master {
namespace {

class MembershipNodesTest : public MasterFixture {
 protected:
  // Registers rail `rail` of node `name` (group = rail, as a launcher sets it up).
  PeerId rail(const std::string& name, uint32_t r, uint32_t rails = 2,
              const std::string& host = "10.0.0.1") {
    const NodeClaim claim{name, r, rails, r, host};
    EXPECT_TRUE(m.check_node_claim(claim).is_ok()) << m.check_node_claim(claim).to_string();
    const PeerId id = m.allocate_id();
    m.add_pending(id, r, host, static_cast<uint16_t>(1000 + id), claim);
    return id;
  }
  Status claim(const std::string& name, uint32_t r, uint32_t rails, uint32_t group,
               const std::string& host = "10.0.0.1") {
    return m.check_node_claim(NodeClaim{name, r, rails, group, host});
  }
  // Every member waits in update_topology and answers the proposal.
  void round(const std::vector<PeerId>& active) {
    all_update(active);
    all_ready();
  }
  bool active(PeerId id) const {
    auto it = m.members().find(id);
    return it != m.members().end() && it->second.state == Membership::State::kActive;
  }
  lh_status disconnect_code(PeerId id) const {
    for (const auto& [who, why] : out.disconnected)
      if (who == id) return why.code();
    return LH_OK;
  }
};

TEST_F(MembershipNodesTest, ANodeIsAdmittedOnlyOnceAllItsRailsRegistered) {
  const PeerId a0 = rail("a", 0);
  EXPECT_FALSE(active(a0));
  EXPECT_FALSE(m.reconfiguration_needed()) << "an incomplete node is nothing to do";
  EXPECT_TRUE(out.take<wire::TopologyMsg>().empty());
  auto waiting = out.take<wire::NodeWaitingMsg>();
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].first, a0);
  EXPECT_EQ(waiting[0].second.rails, 2u);
  EXPECT_EQ(waiting[0].second.registered, std::vector<uint32_t>{0});
  const PeerId a1 = rail("a", 1);
  all_ready();  // no active member: the complete node is admitted at once, both rails together
  EXPECT_TRUE(active(a0));
  EXPECT_TRUE(active(a1));
  EXPECT_EQ(m.rings().at(0), std::vector<PeerId>{a0});
  EXPECT_EQ(m.rings().at(1), std::vector<PeerId>{a1});
}

TEST_F(MembershipNodesTest, AnIncompleteNodeWaitsWhileCompleteOnesJoin) {
  const PeerId a0 = rail("a", 0), a1 = rail("a", 1);
  all_ready();
  out.sent.clear();
  const PeerId b0 = rail("b", 0);  // b never completes
  const PeerId c0 = rail("c", 0), c1 = rail("c", 1);
  round({a0, a1});
  EXPECT_TRUE(active(c0) && active(c1));
  EXPECT_FALSE(active(b0));
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{a0, c0}));
  EXPECT_FALSE(m.pending_flag()) << "b's lone rail raises no flag";
}

TEST_F(MembershipNodesTest, LosingOneRailEvictsItsSiblingsAndAbortsEveryGroup) {
  const PeerId a0 = rail("a", 0), a1 = rail("a", 1);
  all_ready();
  const PeerId b0 = rail("b", 0), b1 = rail("b", 1);
  round({a0, a1});
  const PeerId c0 = rail("c", 0), c1 = rail("c", 1);
  round({a0, a1, b0, b1});
  out.sent.clear();
  m.drop_peer(b1, "connection lost");
  EXPECT_EQ(disconnect_code(b0), LH_ERR_NODE_EVICTED);
  EXPECT_FALSE(m.members().contains(b0));
  EXPECT_EQ(m.nodes().nodes().size(), 2u);
  // Both rails' groups are aborted on the surviving nodes, and the next round succeeds.
  std::set<std::pair<PeerId, uint32_t>> aborted;
  for (auto& [to, abort] : out.take<wire::AbortMsg>()) {
    EXPECT_EQ(abort.code, LH_ERR_PEER_LOST);
    aborted.emplace(to, abort.group);
  }
  EXPECT_EQ(aborted, (std::set<std::pair<PeerId, uint32_t>>{{a0, 0}, {c0, 0}, {a1, 1}, {c1, 1}}));
  EXPECT_TRUE(m.pending_flag());
  round({a0, a1, c0, c1});
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{a0, c0}));
  EXPECT_EQ(m.rings().at(1), (std::vector<PeerId>{a1, c1}));
}

TEST_F(MembershipNodesTest, LosingARailOfAWaitingNodeEvictsItsRegisteredRails) {
  const PeerId a0 = rail("a", 0, 3), a1 = rail("a", 1, 3);
  m.drop_peer(a0, "connection lost");
  EXPECT_EQ(disconnect_code(a1), LH_ERR_NODE_EVICTED);
  EXPECT_TRUE(m.nodes().nodes().empty());
  EXPECT_TRUE(claim("a", 0, 3, 0).is_ok()) << "the identity is free for the restarted node";
}

TEST_F(MembershipNodesTest, ARailLostMidRoundTakesItsNodeOutOfTheRound) {
  const PeerId a0 = rail("a", 0), a1 = rail("a", 1);
  all_ready();
  const PeerId b0 = rail("b", 0), b1 = rail("b", 1);
  all_update({a0, a1});
  ASSERT_TRUE(m.round_in_progress());
  m.drop_peer(b0, "missed 3 heartbeats");
  EXPECT_EQ(disconnect_code(b1), LH_ERR_NODE_EVICTED);
  // The round restarts with the members alone, and neither rail of b is in it: a0 and a1 are
  // told a change to their epoch that adds nobody.
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_FALSE(proposals.empty());
  const uint64_t epoch = proposals.back().second.epoch;
  size_t told = 0;
  for (const auto& [to, p] : proposals) {
    if (p.epoch != epoch) continue;
    ++told;
    EXPECT_TRUE(to == a0 || to == a1) << to;
    EXPECT_EQ(p.base_epoch, m.epoch());
    EXPECT_TRUE(p.members.empty());
    EXPECT_TRUE(p.removed.empty());
  }
  EXPECT_EQ(told, 2u);
}

TEST_F(MembershipNodesTest, AGracefulLeaveTakesTheNodeOutRailByRail) {
  const PeerId a0 = rail("a", 0), a1 = rail("a", 1);
  all_ready();
  const PeerId b0 = rail("b", 0), b1 = rail("b", 1);
  round({a0, a1});
  out.sent.clear();
  m.drop_peer(b0, "left gracefully", /*graceful=*/true);
  EXPECT_TRUE(out.disconnected.empty()) << "b1 may still leave on its own";
  EXPECT_TRUE(out.take<wire::AbortMsg>().empty());
  EXPECT_FALSE(claim("b", 0, 2, 0).is_ok()) << "the departing node keeps its identity";
  // b1 asks to go on instead of leaving: the node is leaving, so it is removed.
  ASSERT_TRUE(m.on_update_topology(b1, m.epoch()).is_ok());
  EXPECT_EQ(disconnect_code(b1), LH_ERR_NODE_EVICTED);
  EXPECT_TRUE(m.nodes().nodes().size() == 1u);
  round({a0, a1});
  EXPECT_EQ(m.rings().at(1), std::vector<PeerId>{a1});
}

TEST_F(MembershipNodesTest, BadClaimsAreRefusedWithTheReason) {
  rail("a", 0, 2, "10.0.0.1");
  const Status other_host = claim("a", 1, 2, 1, "10.0.0.2");
  EXPECT_EQ(other_host.code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(other_host.message().find("two nodes claim the identity 'a'"), std::string::npos)
      << other_host.message();
  const Status rails = claim("a", 1, 3, 1);
  EXPECT_NE(rails.message().find("rail counts disagree"), std::string::npos) << rails.message();
  const Status twice = claim("a", 0, 2, 0);
  EXPECT_NE(twice.message().find("rail 0 of node 'a' registered twice"), std::string::npos)
      << twice.message();
  const Status range = claim("b", 2, 2, 2);
  EXPECT_NE(range.message().find("out of range"), std::string::npos) << range.message();
  const Status group = claim("a", 1, 2, 0);
  EXPECT_NE(group.message().find("both in peer group 0"), std::string::npos) << group.message();
  rail("a", 1);
  const Status full = claim("a", 1, 2, 1);
  EXPECT_NE(full.message().find("already has all its 2 rails"), std::string::npos)
      << full.message();
  EXPECT_TRUE(claim("", 0, 1, 5).is_ok()) << "a peer without a node is a node of one";
}

// A group holds one shape of member: the rails of a node re-form together, so a member that
// re-forms for other reasons would put its group out of step (docs/protocol.md, "Node agreement").
TEST_F(MembershipNodesTest, AGroupHoldsTheSameRailOfNodesOfAsManyRailsOrPeersOfNoNode) {
  const PeerId a0 = rail("a", 0), a1 = rail("a", 1);
  all_ready();
  const Status lone = claim("", 0, 1, 1);
  EXPECT_EQ(lone.code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(lone.message().find("peer group 1 holds rail 1 of a node of 2 rails (peer " +
                                std::to_string(a1) + ") and this rank is a peer of no node"),
            std::string::npos)
      << lone.message();
  EXPECT_NE(claim("b", 0, 3, 0, "10.0.0.2").message().find("rail 0 of a node of 3 rails"),
            std::string::npos)
      << "as many rails";
  EXPECT_NE(claim("b", 1, 2, 0, "10.0.0.2").message().find("this rank is rail 1 of a node of 2"),
            std::string::npos)
      << "the same rail";
  EXPECT_TRUE(claim("b", 0, 2, 0, "10.0.0.2").is_ok());
  // A pending member shows its group's shape too, and a group of peers of no node stays one.
  (void)join(7);
  EXPECT_NE(claim("c", 0, 2, 7, "10.0.0.3").message().find("holds a peer of no node"),
            std::string::npos);
  EXPECT_TRUE(claim("", 0, 1, 7).is_ok());
  // A lost member that the committed ring still lists shows nothing.
  m.drop_peer(a0, "connection lost");
  EXPECT_TRUE(claim("", 0, 1, 0).is_ok()) << "group 0 is empty";
}

}  // namespace
}  // namespace longhaul::master
