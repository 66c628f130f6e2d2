// The master's membership state machine driven directly, with a recording outbox.
#include "master/membership.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "master_fixture.hpp"

namespace longhaul::master {
namespace {

using MembershipTest = MasterFixture;

TEST_F(MembershipTest, FirstPeerIsAdmittedAtOnce) {
  const PeerId a = join();
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 1u);
  EXPECT_EQ(proposals[0].first, a);
  ASSERT_TRUE(m.on_links_ready(a, proposals[0].second.epoch, {}).is_ok());
  auto commits = out.take<wire::EpochCommitMsg>();
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(m.epoch(), commits[0].second.epoch);
  EXPECT_EQ(m.active_count(), 1u);
  EXPECT_FALSE(m.reconfiguration_needed());
}

TEST_F(MembershipTest, JoinerWaitsUntilEveryActivePeerReachesUpdateTopology) {
  const PeerId a = join();
  all_ready();
  const PeerId b = join();
  all_update({a});
  all_ready();
  ASSERT_EQ(m.active_count(), 2u);
  out.sent.clear();
  const PeerId c = join();
  EXPECT_TRUE(out.take<wire::TopologyMsg>().empty());
  // Both active peers are told a peer is pending.
  auto flags = out.take<wire::PendingChangedMsg>();
  EXPECT_EQ(flags.size(), 2u);
  ASSERT_TRUE(m.on_update_topology(a, m.epoch()).is_ok());
  EXPECT_TRUE(out.take<wire::TopologyMsg>().empty()) << "must wait for b too";
  ASSERT_TRUE(m.on_update_topology(b, m.epoch()).is_ok());
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 3u);
  // The joiner gets the whole epoch; the members only what changes: c appended to their ring.
  EXPECT_EQ(proposals[2].first, c);
  EXPECT_EQ(proposals[2].second.rings.at(0).order, (std::vector<PeerId>{a, b, c}));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(proposals[i].second.base_epoch, m.epoch());
    EXPECT_EQ(proposals[i].second.rings.at(0).order, std::vector<PeerId>{c});
    ASSERT_EQ(proposals[i].second.members.size(), 1u);
    EXPECT_EQ(proposals[i].second.members[0].peer_id, c);
  }
  for (auto& [id, p] : proposals) ASSERT_TRUE(m.on_links_ready(id, p.epoch, {}).is_ok());
  EXPECT_EQ(out.take<wire::EpochCommitMsg>().size(), 3u);
  EXPECT_EQ(m.active_count(), 3u);
}

// The flag goes to each member when it changes, not once per joiner: a wave of joins costs the
// master one message per member, and no scan of the members per join.
TEST_F(MembershipTest, AWaveOfJoinersRaisesEachMembersFlagOnce) {
  form(3);
  for (int i = 0; i < 5; ++i) join();
  EXPECT_EQ(out.take<wire::PendingChangedMsg>().size(), 3u);
  EXPECT_TRUE(m.reconfiguration_needed());
}

TEST_F(MembershipTest, UpdateTopologyWithNothingToDoAnswersUnchanged) {
  const PeerId a = join();
  all_ready();
  out.sent.clear();
  ASSERT_TRUE(m.on_update_topology(a, m.epoch()).is_ok());
  auto unchanged = out.take<wire::TopologyUnchangedMsg>();
  ASSERT_EQ(unchanged.size(), 1u);
  EXPECT_EQ(unchanged[0].second.epoch, m.epoch());
}

TEST_F(MembershipTest, LostActivePeerAbortsItsGroupAndTheNextRoundDropsIt) {
  std::vector<PeerId> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(join(i == 3 ? 1 : 0));
    if (i > 0) all_update(std::vector<PeerId>(ids.begin(), ids.end() - 1));
    all_ready();
  }
  out.sent.clear();
  m.drop_peer(ids[1], "connection lost");
  auto aborts = out.take<wire::AbortMsg>();
  ASSERT_EQ(aborts.size(), 2u) << "only group 0's survivors";
  for (auto& [to, abort] : aborts) {
    EXPECT_NE(to, ids[3]);
    EXPECT_NE(abort.reason.find("connection lost"), std::string::npos);
    EXPECT_EQ(abort.code, LH_ERR_PEER_LOST);
  }
  EXPECT_TRUE(m.reconfiguration_needed());
  all_update({ids[0], ids[2], ids[3]});
  const uint64_t epoch = all_ready();
  EXPECT_EQ(m.epoch(), epoch);
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{ids[0], ids[2]}));
  EXPECT_EQ(m.rings().at(1), (std::vector<PeerId>{ids[3]}));
}

TEST_F(MembershipTest, PeerLostMidRoundRestartsTheRoundWithoutIt) {
  const PeerId a = join();
  all_ready();
  const PeerId b = join();
  all_update({a});
  auto first = out.take<wire::TopologyMsg>();
  ASSERT_EQ(first.size(), 2u);
  ASSERT_TRUE(m.on_links_ready(a, first[0].second.epoch, {}).is_ok());
  m.drop_peer(b, "killed");
  auto second = out.take<wire::TopologyMsg>();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].first, a);
  EXPECT_GT(second[0].second.epoch, first[0].second.epoch);
  // A late answer to the replaced proposal is ignored.
  EXPECT_TRUE(m.on_links_ready(a, first[0].second.epoch, {}).is_ok());
  ASSERT_TRUE(m.on_links_ready(a, second[0].second.epoch, {}).is_ok());
  EXPECT_EQ(m.epoch(), second[0].second.epoch);
}

TEST_F(MembershipTest, UnreachablePairIsKeptApartInTheNextRing) {
  std::vector<PeerId> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(join());
    if (i > 0) all_update(std::vector<PeerId>(ids.begin(), ids.end() - 1));
    all_ready();
  }
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{ids[0], ids[1], ids[2], ids[3]}));
  out.sent.clear();
  ASSERT_TRUE(m.on_peer_lost(ids[0], m.epoch(), ids[1], "reset").is_ok());
  all_update(ids);
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 4u);
  const auto ring = proposals[0].second.rings.at(0).order;
  EXPECT_EQ(ring, (std::vector<PeerId>{ids[0], ids[2], ids[1], ids[3]}));
  for (auto& [id, p] : proposals) ASSERT_TRUE(m.on_links_ready(id, p.epoch, {}).is_ok());
  EXPECT_EQ(m.rings().at(0), ring);
}

TEST_F(MembershipTest, NoRingAvoidsTheUnreachableLinksSoAPeerIsEvictedWithTheReason) {
  const PeerId a = join();
  all_ready();
  const PeerId b = join();
  all_update({a});
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 2u);
  const uint64_t epoch = proposals[0].second.epoch;
  ASSERT_TRUE(m.on_links_ready(a, epoch, {b}).is_ok());
  ASSERT_TRUE(m.on_links_ready(b, epoch, {a}).is_ok());
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].first, b) << "the newest of the two goes";
  EXPECT_NE(out.disconnected[0].second.message().find("cannot reach peers 1"), std::string::npos)
      << out.disconnected[0].second.message();
  auto retry = out.take<wire::TopologyMsg>();
  ASSERT_EQ(retry.size(), 1u);
  ASSERT_TRUE(m.on_links_ready(a, retry[0].second.epoch, {}).is_ok());
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{a}));
}

// With full_mesh, peers link to non-neighbours too. A pair that cannot link and is already apart
// in the ring cannot be helped by another ring: proposing one would repeat the same answer forever.
// One peer of the pair is evicted with the reason instead, as when no ring keeps a pair apart.
TEST_F(MembershipTest, AFullMeshPairThatCannotLinkEvictsAPeerInsteadOfProposingForever) {
  std::vector<PeerId> ids = form(3, 0, /*full_mesh=*/true);
  ids.push_back(join(0, /*full_mesh=*/true));
  all_update({ids[0], ids[1], ids[2]});
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 4u);
  ASSERT_EQ(proposals.back().second.rings.at(0).order, ids) << "the joiner's whole proposal";
  const uint64_t epoch = proposals[0].second.epoch;
  // ids[0] and ids[2] are not neighbours: they only tried to link for the full mesh.
  for (PeerId id : ids) {
    std::vector<PeerId> unreachable;
    if (id == ids[0]) unreachable = {ids[2]};
    if (id == ids[2]) unreachable = {ids[0]};
    ASSERT_TRUE(m.on_links_ready(id, epoch, unreachable).is_ok());
  }
  ASSERT_EQ(out.disconnected.size(), 1u) << "the same proposal again would get the same answer";
  EXPECT_EQ(out.disconnected[0].first, ids[2]) << "the newer of the two goes";
  EXPECT_NE(out.disconnected[0].second.message().find("cannot reach peers 1"), std::string::npos)
      << out.disconnected[0].second.message();
  all_ready();
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{ids[0], ids[1], ids[3]}));
}

TEST_F(MembershipTest, UnreachableNewcomersAreEvictedBeforeTheMemberThatReportsThem) {
  const PeerId a = join();
  all_ready();
  const PeerId x = join();
  const PeerId y = join();
  all_update({a});
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 3u);
  const uint64_t epoch = proposals[0].second.epoch;
  // Neither newcomer can link to a, and each says so (a broken link fails at both ends): a has
  // the most unreachable links, but it was admitted before.
  ASSERT_TRUE(m.on_links_ready(a, epoch, {x, y}).is_ok());
  ASSERT_TRUE(m.on_links_ready(x, epoch, {a}).is_ok());
  ASSERT_TRUE(m.on_links_ready(y, epoch, {a}).is_ok());
  ASSERT_EQ(out.disconnected.size(), 2u);
  EXPECT_EQ(out.disconnected[0].first, y);
  EXPECT_EQ(out.disconnected[1].first, x);
  all_ready();
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{a}));
}

// A member naming newcomers unreachable while they link to it fine (their answers name nothing)
// kept anyone from joining: its word alone evicted them. Now its claims are the ones nobody
// confirms, and it goes first.
TEST_F(MembershipTest, AClaimTheAccusedContradictsRemovesTheClaimerNotTheNewcomer) {
  const PeerId a = join();
  all_ready();
  const PeerId x = join();
  all_update({a});
  auto proposals = out.take<wire::TopologyMsg>();
  const uint64_t epoch = proposals[0].second.epoch;
  ASSERT_TRUE(m.on_links_ready(a, epoch, {x}).is_ok());
  ASSERT_TRUE(m.on_links_ready(x, epoch, {}).is_ok());
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].first, a);
  all_ready();
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{x}));
}

// Issue 50, item 2: a first member that never opens its links names the newcomer unreachable, and
// the newcomer (nobody came) names it back: the claim looked confirmed and the newcomer went. A
// claim about a newcomer the master reached counts only from a member that completed links of its
// own, so the first member is the one removed.
TEST_F(MembershipTest, AFirstMemberThatNeverLinkedLosesItsClaimAboutANewcomerTheMasterReached) {
  const PeerId a = join();
  all_ready();
  const PeerId x = join();
  m.note_reached(x, true);
  all_update({a});
  auto proposals = out.take<wire::TopologyMsg>();
  const uint64_t epoch = proposals[0].second.epoch;
  ASSERT_TRUE(m.on_links_ready(a, epoch, {x}).is_ok());
  ASSERT_TRUE(m.on_links_ready(x, epoch, {a}).is_ok());
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].first, a);
  all_ready();
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{x}));
}

// The same claims from a member that has completed links of its own count as before: the
// newcomer, not the member that worked so far, goes.
TEST_F(MembershipTest, AMemberThatLinkedBeforeKeepsItsClaimAboutANewcomer) {
  const auto ids = form(2);
  const PeerId x = join();
  m.note_reached(x, true);
  all_update(ids);
  auto proposals = out.take<wire::TopologyMsg>();
  const uint64_t epoch = proposals[0].second.epoch;
  // The newcomer's proposal is whole (the members' may be changes to their epoch).
  const auto to_x =
      std::find_if(proposals.begin(), proposals.end(), [x](const auto& p) { return p.first == x; });
  ASSERT_NE(to_x, proposals.end());
  const auto& ring = to_x->second.rings.at(0).order;
  ASSERT_EQ(ring.size(), 3u);
  const auto at = std::find(ring.begin(), ring.end(), x) - ring.begin();
  const PeerId neighbour = ring[static_cast<size_t>((at + 1) % 3)];
  for (PeerId id : ring) {
    std::vector<PeerId> unreachable;
    if (id == neighbour) unreachable = {x};
    if (id == x) unreachable = {neighbour};
    ASSERT_TRUE(m.on_links_ready(id, epoch, unreachable).is_ok());
  }
  // Two of three cannot avoid the pair in a ring of three: one of the pair goes, the newcomer.
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].first, x);
}

// Claims about a peer that is not the claimer's ring neighbour are refused when it does not link
// as a full mesh (an honest member never links to it, so cannot lose the link).
TEST_F(MembershipTest, ClaimsAboutNonNeighboursAreRefusedWithoutAFullMesh) {
  std::vector<PeerId> ids = form(4);
  const std::vector<PeerId> ring = m.rings().at(0);
  const PeerId opposite = ring[2];
  EXPECT_EQ(m.on_peer_lost(ring[0], m.epoch(), opposite, "lie").code(), LH_ERR_PROTOCOL);
  EXPECT_TRUE(out.take<wire::AbortMsg>().empty()) << "nothing changed";
  EXPECT_TRUE(m.on_peer_lost(ring[0], m.epoch(), ring[1], "lost").is_ok());
  EXPECT_FALSE(out.take<wire::AbortMsg>().empty());
}

// One member's reports of lost links the accused never confirm: after kMaxUnconfirmedClaims
// distinct peers within the window it is removed, and the accused stay.
TEST_F(MembershipTest, AMemberWhoseLossReportsNobodyConfirmsIsRemoved) {
  form(8);
  const PeerId liar = m.rings().at(0)[0];
  std::set<PeerId> accused;
  for (size_t round = 0; round < Membership::kMaxUnconfirmedClaims + 1; ++round) {
    if (!m.members().contains(liar)) break;
    const std::vector<PeerId> ring = m.rings().at(0);
    const size_t at = static_cast<size_t>(std::find(ring.begin(), ring.end(), liar) - ring.begin());
    const PeerId victim = ring[(at + 1) % ring.size()];
    accused.insert(victim);
    ASSERT_TRUE(m.on_peer_lost(liar, m.epoch(), victim, "lie").is_ok());
    all_update(ring);
    if (m.round_in_progress()) all_ready();
  }
  EXPECT_FALSE(m.members().contains(liar));
  ASSERT_FALSE(out.disconnected.empty());
  EXPECT_EQ(out.disconnected.back().first, liar);
  EXPECT_NE(out.disconnected.back().second.message().find("confirmed by none"), std::string::npos)
      << out.disconnected.back().second.message();
  for (PeerId id : accused) EXPECT_TRUE(m.members().contains(id));
}

TEST_F(MembershipTest, RoundTimeoutEvictsTheSilentParticipants) {
  const PeerId a = join();
  all_ready();
  const PeerId b = join();
  all_update({a});
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(out.rounds.size(), 2u);
  ASSERT_TRUE(m.on_links_ready(a, proposals[0].second.epoch, {}).is_ok());
  m.on_round_timeout(out.rounds.back());
  ASSERT_EQ(out.disconnected.size(), 1u);
  EXPECT_EQ(out.disconnected[0].first, b);
  EXPECT_EQ(out.disconnected[0].second.code(), LH_ERR_TIMEOUT);
  all_ready();
  EXPECT_EQ(m.active_count(), 1u);
}

// A member alone in its group aborts nobody when it waits; the member of the other group has not
// come to wait yet when the joiner gives up.
TEST_F(MembershipTest, JoinerLeavingBeforeAdmissionReleasesTheWaiter) {
  const PeerId a = join(0);
  all_ready();
  const PeerId b = join(1);
  all_update({a});
  all_ready();
  const PeerId c = join(1);
  out.sent.clear();
  ASSERT_TRUE(m.on_update_topology(a, m.epoch()).is_ok());
  EXPECT_TRUE(out.take<wire::AbortMsg>().empty());
  m.drop_peer(c, "gave up");
  auto unchanged = out.take<wire::TopologyUnchangedMsg>();
  ASSERT_EQ(unchanged.size(), 1u);
  EXPECT_EQ(unchanged[0].first, a);
  ASSERT_TRUE(m.on_update_topology(b, m.epoch()).is_ok());
  EXPECT_EQ(out.take<wire::TopologyUnchangedMsg>().size(), 1u);
}

// The first member to wait for a joiner aborted the rest of its group: that epoch is over even if
// the joiner leaves before anyone is admitted. Telling the waiter "unchanged" would leave the group
// in an epoch whose every batch attempt fails.
TEST_F(MembershipTest, AnEpochAbortedForAJoinerReFormsEvenIfTheJoinerLeaves) {
  const PeerId a = join();
  all_ready();
  const PeerId b = join();
  all_update({a});
  all_ready();
  const uint64_t epoch = m.epoch();
  const PeerId c = join();
  out.sent.clear();
  ASSERT_TRUE(m.on_update_topology(a, m.epoch()).is_ok());
  EXPECT_FALSE(out.take<wire::AbortMsg>().empty());
  m.drop_peer(c, "gave up");
  EXPECT_TRUE(out.take<wire::TopologyUnchangedMsg>().empty());
  ASSERT_TRUE(m.on_update_topology(b, m.epoch()).is_ok());
  EXPECT_TRUE(out.take<wire::TopologyUnchangedMsg>().empty());
  all_ready();
  EXPECT_EQ(m.epoch(), epoch + 1);
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{a, b}));
}

// Peers sample the peers-pending flag at their own times: one may enter update_topology while
// another of its group starts a collective that needs it. The first to wait aborts its group, so
// the other fails fast and comes to update_topology instead of waiting forever.
TEST_F(MembershipTest, FirstMemberToWaitAbortsTheRestOfItsGroupOnce) {
  std::vector<PeerId> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(join(i == 3 ? 1 : 0));
    if (i > 0) all_update(std::vector<PeerId>(ids.begin(), ids.end() - 1));
    all_ready();
  }
  join();  // a newcomer: a reconfiguration is needed
  out.sent.clear();
  out.reconfiguring.clear();
  all_update({ids[0]});
  auto aborts = out.take<wire::AbortMsg>();
  ASSERT_EQ(aborts.size(), 3u) << "group 0 only (the waiting member included)";
  for (auto& [to, abort] : aborts) {
    EXPECT_NE(to, ids[3]);
    EXPECT_NE(abort.reason.find("waiting for a reconfiguration"), std::string::npos);
    EXPECT_EQ(abort.code, LH_ERR_ABORTED) << "a reconfiguration loses no peer";
  }
  EXPECT_EQ(out.reconfiguring, (std::vector<uint32_t>{0}));
  all_update({ids[1], ids[3]});  // later waiters of group 0, the only member of group 1: no abort
  EXPECT_TRUE(out.take<wire::AbortMsg>().empty());
  EXPECT_EQ(out.reconfiguring.size(), 1u);
  all_update({ids[2]});
  EXPECT_TRUE(out.take<wire::AbortMsg>().empty());
  all_ready();
  EXPECT_EQ(m.rings().at(0).size(), 4u);
}

TEST_F(MembershipTest, ProtocolViolationsAreRefusedWithoutChangingState) {
  const PeerId a = join();
  const PeerId b = join();
  EXPECT_EQ(m.on_update_topology(a, 0).code(), LH_ERR_PROTOCOL) << "not admitted yet";
  all_ready();
  EXPECT_EQ(m.on_update_topology(a, m.epoch() + 7).code(), LH_ERR_PROTOCOL) << "wrong epoch";
  EXPECT_EQ(m.on_links_ready(a, 999, {}).code(), LH_ERR_PROTOCOL) << "never proposed";
  const PeerId c = join();
  ASSERT_TRUE(m.on_update_topology(a, m.epoch()).is_ok());
  EXPECT_EQ(m.on_update_topology(a, m.epoch()).code(), LH_ERR_PROTOCOL) << "already waiting";
  EXPECT_EQ(m.on_update_topology(b, m.epoch()).code(), LH_ERR_PROTOCOL) << "b is still pending";
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_FALSE(proposals.empty());
  const uint64_t epoch = proposals.back().second.epoch;
  ASSERT_TRUE(m.on_links_ready(c, epoch, {}).is_ok());
  EXPECT_EQ(m.on_links_ready(c, epoch, {}).code(), LH_ERR_PROTOCOL) << "answered twice";
  EXPECT_EQ(m.members().size(), 3u);
}

}  // namespace
}  // namespace longhaul::master
