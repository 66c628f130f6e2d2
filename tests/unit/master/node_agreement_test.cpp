// The master's node agreement (node_agreement.cpp): a barrier of one node's rails that ORs their
// flags, driven directly with Membership and a recording outbox (as the server wires them).
#include "master/node_agreement.hpp"

#include <gtest/gtest.h>

#include <map>

#include "master_fixture.hpp"

namespace longhaul::master {
namespace {

class NodeAgreementTest : public MasterFixture {
 protected:
  NodeAgreementTest() {
    out.on_peer_left = [this](PeerId who, bool graceful) { agreement.on_peer_left(who, graceful); };
  }

  NodeAgreement agreement{out, m};

  // Admits node `name` of `rails` rails (rail r in group r) beside the active members.
  std::vector<PeerId> node(const std::string& name, uint32_t rails) {
    std::vector<PeerId> active;
    for (const auto& [id, member] : m.members())
      if (member.state == Membership::State::kActive) active.push_back(id);
    std::vector<PeerId> ids;
    for (uint32_t r = 0; r < rails; ++r) {
      const NodeClaim claim{name, r, rails, r, "10.0.0.1"};
      EXPECT_TRUE(m.check_node_claim(claim).is_ok());
      ids.push_back(m.allocate_id());
      m.add_pending(ids.back(), r, claim.host, static_cast<uint16_t>(1000 + ids.back()), claim);
    }
    all_update(active);
    all_ready();
    out.sent.clear();
    return ids;
  }
  Status agree(PeerId id, uint64_t point, uint32_t flags, uint32_t kind = 1) {
    return agreement.on_agree(id, wire::NodeAgreeMsg{point, kind, flags});
  }
  // Rail `rail` of node `name` (2 rails, rail r in group r), peer `id`, rejoins a restarted master
  // (m.begin_recovery()) with the answer it had to its node's point `answered`, as the server
  // hands a REJOIN on.
  Status rejoin(PeerId id, uint32_t rail, const std::string& name, uint64_t answered = 0,
                uint32_t answer = 0) {
    Membership::RejoinReport r = rejoin_report(id, /*epoch=*/4, {id}, /*group=*/rail);
    r.world = 2;
    r.node = NodeClaim{name, rail, 2, rail, "10.0.0.1"};
    LH_RETURN_IF_ERROR(m.add_rejoined(r));
    return agreement.on_rejoin(id, answered, answer);
  }
  // The answers sent since the last call: recipient -> (point, flags).
  std::map<PeerId, std::pair<uint64_t, uint32_t>> answers() {
    std::map<PeerId, std::pair<uint64_t, uint32_t>> a;
    for (auto& [to, msg] : out.take<wire::NodeAgreedMsg>())
      EXPECT_TRUE(a.emplace(to, std::pair{msg.point, msg.flags}).second) << to << " told twice";
    return a;
  }
};

TEST_F(NodeAgreementTest, EveryRailGetsTheOrOfAllFlagsOnceTheLastReachedThePoint) {
  const auto a = node("a", 3), b = node("b", 3);
  ASSERT_TRUE(agree(a[0], 1, 0).is_ok());
  ASSERT_TRUE(agree(a[1], 1, 1).is_ok());
  ASSERT_TRUE(agree(b[0], 1, 2).is_ok());
  EXPECT_TRUE(answers().empty()) << "a's rail 2 and b's rails 1 and 2 have not reached point 1";
  ASSERT_TRUE(agree(a[2], 1, 0).is_ok());
  using Answer = std::pair<uint64_t, uint32_t>;
  EXPECT_EQ(answers(), (std::map<PeerId, Answer>{{a[0], {1, 1}}, {a[1], {1, 1}}, {a[2], {1, 1}}}))
      << "b's flags are b's own";
  // The next point starts afresh.
  for (PeerId id : a) ASSERT_TRUE(agree(id, 2, 0).is_ok());
  EXPECT_EQ(answers(), (std::map<PeerId, Answer>{{a[0], {2, 0}}, {a[1], {2, 0}}, {a[2], {2, 0}}}));
  ASSERT_TRUE(agree(b[1], 1, 0).is_ok());
  ASSERT_TRUE(agree(b[2], 1, 4).is_ok());
  EXPECT_EQ(answers(), (std::map<PeerId, Answer>{{b[0], {1, 6}}, {b[1], {1, 6}}, {b[2], {1, 6}}}));
  EXPECT_EQ(agreement.open_points(), 0u);
}

TEST_F(NodeAgreementTest, ARailAtAnotherPointThanItsSiblingsBreaksTheProtocol) {
  const auto a = node("a", 2);
  ASSERT_TRUE(agree(a[0], 1, 0).is_ok());
  const Status ahead = agree(a[1], 3, 0);
  EXPECT_EQ(ahead.code(), LH_ERR_PROTOCOL);
  EXPECT_NE(ahead.message().find("rail 1 reached node agreement point 3 (kind 1) while its "
                                 "siblings are at point 1 (kind 1)"),
            std::string::npos)
      << ahead.to_string();
  EXPECT_EQ(agree(a[0], 1, 0).code(), LH_ERR_PROTOCOL) << "the same point twice";
  EXPECT_EQ(agree(a[0], 2, 0).code(), LH_ERR_PROTOCOL) << "past a point without its answer";
  EXPECT_TRUE(answers().empty());
  ASSERT_TRUE(agree(a[1], 1, 0).is_ok());
  EXPECT_EQ(answers().size(), 2u);
  const Status answered = agree(a[1], 1, 0);
  EXPECT_EQ(answered.code(), LH_ERR_PROTOCOL) << "a point it has the answer to";
  EXPECT_NE(answered.message().find("reported node agreement point 1, which has its answer "
                                    "already"),
            std::string::npos)
      << answered.to_string();
  // The same point reached for another reason: the rails have diverged.
  const auto b = node("b", 2);
  ASSERT_TRUE(agree(b[0], 1, 0, /*kind=*/1).is_ok());
  const Status other_kind = agree(b[1], 1, 0, /*kind=*/3);
  EXPECT_EQ(other_kind.code(), LH_ERR_PROTOCOL);
  EXPECT_NE(other_kind.message().find("point 1 (kind 3) while its siblings are at point 1 (kind "
                                      "1)"),
            std::string::npos)
      << other_kind.to_string();
}

TEST_F(NodeAgreementTest, OnlyAdmittedRailsOfNodesOfSeveralRailsMayAsk) {
  const auto lone = form(1, /*group=*/5);
  EXPECT_EQ(agree(lone[0], 1, 0).code(), LH_ERR_PROTOCOL) << "a node of one rail decides alone";
  const auto single = node("s", 1);
  EXPECT_EQ(agree(single[0], 1, 0).code(), LH_ERR_PROTOCOL);
  const PeerId pending = join(7);
  EXPECT_EQ(agree(pending, 1, 0).code(), LH_ERR_PROTOCOL) << "not admitted";
}

// A rail lost abruptly takes its node with it: the point is forgotten, its siblings are evicted
// (and released by that), and nobody is answered.
TEST_F(NodeAgreementTest, ALostRailForgetsItsNodesPointAndItsSiblingsAreEvicted) {
  const auto a = node("a", 2), b = node("b", 2);
  ASSERT_TRUE(agree(a[0], 1, 1).is_ok());
  m.drop_peer(a[1], "connection lost");
  EXPECT_EQ(agreement.open_points(), 0u);
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].first, a[0]);
  EXPECT_EQ(out.disconnected[0].second.code(), LH_ERR_NODE_EVICTED);
  EXPECT_TRUE(answers().empty());
  ASSERT_TRUE(agree(b[0], 1, 0).is_ok());
  ASSERT_TRUE(agree(b[1], 1, 0).is_ok());
  EXPECT_EQ(answers().size(), 2u) << "the other node is untouched";
}

// A rail that leaves gracefully will not reach the point; the rails still in its departing node
// are answered without it (they follow it out, docs/protocol.md "Nodes").
TEST_F(NodeAgreementTest, ARailLeavingGracefullyLetsTheOthersAgreeWithoutIt) {
  const auto a = node("a", 3);
  ASSERT_TRUE(agree(a[0], 1, 1).is_ok());
  ASSERT_TRUE(agree(a[1], 1, 0).is_ok());
  m.drop_peer(a[2], "left gracefully", /*graceful=*/true);
  using Answer = std::pair<uint64_t, uint32_t>;
  EXPECT_EQ(answers(), (std::map<PeerId, Answer>{{a[0], {1, 1}}, {a[1], {1, 1}}}));
  EXPECT_EQ(agreement.open_points(), 0u);
}

// A restarted master rebuilds the node from its rails' REJOINs: a rail that reports its point
// before its sibling is back waits for it (the node record is incomplete meanwhile).
TEST_F(NodeAgreementTest, ARestartedMasterAnswersANodeOnceAllItsRailsRejoinedAndReported) {
  m.begin_recovery();
  ASSERT_TRUE(rejoin(1, 0, "a", 6, 2).is_ok());
  ASSERT_TRUE(agree(1, 7, 1).is_ok());
  EXPECT_TRUE(answers().empty()) << "rail 1 has not rejoined";
  ASSERT_TRUE(rejoin(2, 1, "a", 6, 2).is_ok());
  EXPECT_TRUE(answers().empty()) << "rail 1 is back but has not reported";
  ASSERT_TRUE(agree(2, 7, 0).is_ok());
  using Answer = std::pair<uint64_t, uint32_t>;
  EXPECT_EQ(answers(), (std::map<PeerId, Answer>{{1, {7, 1}}, {2, {7, 1}}}));
}

// The previous master answered point 7 to rail 0 and died before its answer reached rail 1.
// Rail 0 reports nothing more (the answer said "re-form": it waits in update_topology for every
// member, rail 1 too), but its REJOIN says what it had: rail 1 gets that same answer, whether
// the REJOIN or rail 1's report reaches the new master first. Point 8 is agreed as usual.
TEST_F(NodeAgreementTest, ARailWhoseAnswerTheLastMasterLostGetsTheAnswerItsSiblingRejoinedWith) {
  using Answer = std::pair<uint64_t, uint32_t>;
  m.begin_recovery();
  PeerId next = 1;
  for (const bool ahead_first : {true, false}) {
    SCOPED_TRACE(ahead_first ? "the rail ahead rejoins first" : "the rail behind reports first");
    const std::string name = ahead_first ? "a" : "b";
    const PeerId ahead = next++, behind = next++;
    if (ahead_first) {
      ASSERT_TRUE(rejoin(ahead, 0, name, 7, 5).is_ok());
      ASSERT_TRUE(rejoin(behind, 1, name, 6, 1).is_ok());
      EXPECT_TRUE(answers().empty());
      ASSERT_TRUE(agree(behind, 7, 4).is_ok());
    } else {
      ASSERT_TRUE(rejoin(behind, 1, name, 6, 1).is_ok());
      ASSERT_TRUE(agree(behind, 7, 4).is_ok());
      EXPECT_TRUE(answers().empty()) << "its sibling has not rejoined";
      ASSERT_TRUE(rejoin(ahead, 0, name, 7, 5).is_ok());
    }
    EXPECT_EQ(answers(), (std::map<PeerId, Answer>{{behind, {7, 5}}}));
    EXPECT_EQ(agreement.open_points(), 0u);
    EXPECT_EQ(agree(ahead, 7, 0).code(), LH_ERR_PROTOCOL) << "it had that answer";
    ASSERT_TRUE(agree(ahead, 8, 2).is_ok());
    ASSERT_TRUE(agree(behind, 8, 0).is_ok());
    EXPECT_EQ(answers(), (std::map<PeerId, Answer>{{ahead, {8, 2}}, {behind, {8, 2}}}));
  }
}

// Two rails of one node cannot have had different answers to one point.
TEST_F(NodeAgreementTest, RailsRejoiningWithDifferentAnswersToOnePointBreakTheProtocol) {
  m.begin_recovery();
  ASSERT_TRUE(rejoin(1, 0, "a", 3, 1).is_ok());
  const Status other = rejoin(2, 1, "a", 3, 0);
  EXPECT_EQ(other.code(), LH_ERR_PROTOCOL);
  EXPECT_NE(other.message().find("had answer 0 to node agreement point 3, a sibling had answer 1"),
            std::string::npos)
      << other.to_string();
}

TEST_F(NodeAgreementTest, ARailLeavingWithNoPointOpenChangesNothing) {
  const auto a = node("a", 2);
  m.drop_peer(a[1], "left gracefully", /*graceful=*/true);
  EXPECT_EQ(agreement.open_points(), 0u);
  ASSERT_TRUE(agree(a[0], 1, 1).is_ok());
  EXPECT_EQ(answers().size(), 1u) << "the departing node's last rail agrees alone";
}

}  // namespace
}  // namespace longhaul::master
