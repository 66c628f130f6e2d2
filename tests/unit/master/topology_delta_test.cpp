// The change a member of the committed epoch receives instead of the whole proposal, and the
// peer's side of it: rebuilding the whole proposal from its committed epoch.
#include "master/topology_delta.hpp"

#include <gtest/gtest.h>

#include "peer/topology.hpp"

namespace longhaul::master {
namespace {

wire::MemberInfo member(PeerId id, uint32_t group = 0) {
  return {id, group, "127.0.0.1", static_cast<uint16_t>(1000 + id)};
}

// The whole proposal of `epoch` with these rings (members in ascending id).
wire::TopologyMsg whole(uint64_t epoch, const std::map<uint32_t, std::vector<PeerId>>& rings) {
  wire::TopologyMsg t;
  t.epoch = epoch;
  std::map<PeerId, uint32_t> group_of;
  for (const auto& [group, order] : rings) {
    t.rings.push_back({group, order});
    for (PeerId id : order) group_of[id] = group;
  }
  for (const auto& [id, group] : group_of) t.members.push_back(member(id, group));
  return t;
}

// What peer `self` of `group` makes of `change`, having committed `base`.
peer::Topology applied(const wire::TopologyMsg& base, const wire::TopologyMsg& change, PeerId self,
                       uint32_t group = 0) {
  auto committed = peer::Topology::from_message(base, self, group);
  EXPECT_TRUE(committed.is_ok());
  auto t = peer::Topology::from_message(change, self, group, &*committed);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? *t : peer::Topology{};
}

TEST(MasterTopologyDeltaTest, AJoinerIsTheOnlyMemberAChangeCarries) {
  const auto base = whole(4, {{0, {1, 2, 3}}});
  const auto next = whole(5, {{0, {1, 2, 3, 7}}});
  auto change = topology_delta(4, {{0, {1, 2, 3}}}, next);
  ASSERT_TRUE(change);
  EXPECT_EQ(change->base_epoch, 4u);
  ASSERT_EQ(change->members.size(), 1u);
  EXPECT_EQ(change->members[0].peer_id, 7u);
  EXPECT_TRUE(change->removed.empty());
  ASSERT_TRUE(wire::decode_control(wire::encode_control(*change)).is_ok()) << "valid on the wire";
  const auto t = applied(base, *change, 2);
  EXPECT_EQ(t.epoch, 5u);
  EXPECT_EQ(t.ring(), (std::vector<PeerId>{1, 2, 3, 7}));
  EXPECT_EQ(t.world_size(), 4u);
  ASSERT_NE(t.member(7), nullptr);
  EXPECT_EQ(t.member(7)->port, 1007);
}

TEST(MasterTopologyDeltaTest, LostMembersAreNamedAndTheRingClosesOverThem) {
  const auto base = whole(4, {{0, {1, 2, 3}}, {1, {4, 5}}});
  const auto next = whole(6, {{0, {1, 3, 8}}, {1, {5}}});
  auto change = topology_delta(4, {{0, {1, 2, 3}}, {1, {4, 5}}}, next);
  ASSERT_TRUE(change);
  EXPECT_EQ(change->removed, (std::vector<uint64_t>{2, 4}));
  ASSERT_EQ(change->rings.size(), 1u) << "group 1 appends nothing";
  EXPECT_EQ(change->rings[0].order, (std::vector<uint64_t>{8}));
  EXPECT_EQ(applied(base, *change, 3).ring(), (std::vector<PeerId>{1, 3, 8}));
  const auto other = applied(base, *change, 5, 1);
  EXPECT_EQ(other.ring(), (std::vector<PeerId>{5}));
  EXPECT_EQ(other.world_size(), 4u);
  EXPECT_EQ(other.group_count(), 2u);
}

TEST(MasterTopologyDeltaTest, ARingReorderedAroundUnreachablePairsGoesWhole) {
  EXPECT_FALSE(topology_delta(4, {{0, {1, 2, 3, 4}}}, whole(5, {{0, {1, 3, 2, 4}}})));
  EXPECT_FALSE(topology_delta(4, {{0, {1, 2, 3}}}, whole(5, {{0, {1, 5, 2, 3}}})))
      << "a joiner inserted, not appended";
  EXPECT_FALSE(topology_delta(0, {}, whole(1, {{0, {1}}}))) << "no committed epoch to change";
}

TEST(MasterTopologyDeltaTest, APeerRefusesAChangeToAnEpochItIsNotIn) {
  const auto base = whole(4, {{0, {1, 2}}});
  auto change = topology_delta(3, {{0, {1, 2}}}, whole(5, {{0, {1, 2, 9}}}));
  ASSERT_TRUE(change);
  auto committed = peer::Topology::from_message(base, 1, 0);
  ASSERT_TRUE(committed.is_ok());
  EXPECT_FALSE(peer::Topology::from_message(*change, 1, 0, &*committed).is_ok());
  EXPECT_FALSE(peer::Topology::from_message(*change, 1, 0).is_ok()) << "not admitted yet";
  change->base_epoch = 4;
  change->removed = {6};
  EXPECT_FALSE(peer::Topology::from_message(*change, 1, 0, &*committed).is_ok())
      << "removes a peer the epoch does not have";
}

TEST(MasterTopologyDeltaTest, TheWireRefusesInconsistentChanges) {
  auto change = topology_delta(4, {{0, {1, 2, 3}}}, whole(5, {{0, {1, 3, 7}}}));
  ASSERT_TRUE(change);
  auto refused = [](const wire::TopologyMsg& t) {
    return !wire::decode_control(wire::encode_control(t)).is_ok();
  };
  auto bad = *change;
  bad.removed = {7};
  EXPECT_TRUE(refused(bad)) << "removed and new at once";
  bad = *change;
  bad.removed = {3, 2};
  EXPECT_TRUE(refused(bad)) << "out of order";
  bad = *change;
  bad.base_epoch = 5;
  EXPECT_TRUE(refused(bad)) << "a change to the epoch it proposes";
  bad = whole(5, {{0, {1}}});
  bad.removed = {2};
  EXPECT_TRUE(refused(bad)) << "a whole proposal removes nothing";
}

}  // namespace
}  // namespace longhaul::master
