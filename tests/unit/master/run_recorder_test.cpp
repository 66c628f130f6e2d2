// The master's record of the run for its status page: events with their reasons, rates from
// consecutive PEER_STATS, state mismatches, and the bounds on what it keeps.
#include "master/run_recorder.hpp"

#include <gtest/gtest.h>

#include "master_fixture.hpp"

namespace longhaul::master {
namespace {

// The fixture's membership with a recorder wired as the server wires it.
class RunRecorderTest : public MasterFixture {
 protected:
  RunRecorder rec{1000.0};
  double now = 1000.0;

  RunStatus build() {
    return rec.build(
        m, [](uint32_t) { return std::optional<uint64_t>(4); }, 3, now);
  }
  PeerId joined(uint32_t group = 0) {
    const PeerId id = m.allocate_id();
    rec.joined(id, group, now);
    m.add_pending(id, group, "10.0.0." + std::to_string(id), static_cast<uint16_t>(1000 + id));
    return id;
  }
  // Membership forgets the peer and the recorder hears of it, as MasterServer::peer_left does.
  void forget(PeerId id, const std::string& reason, bool graceful) {
    const uint32_t group = m.members().at(id).group;
    m.drop_peer(id, reason, graceful);
    rec.left(id, group, reason, graceful, now);
  }
  static wire::PeerStatsMsg stats(uint64_t data_sent, uint64_t revision, uint64_t digest) {
    wire::PeerStatsMsg s;
    s.epoch = 1;
    s.data_sent = data_sent;
    s.has_state = true;
    s.state_revision = revision;
    s.state_digest = digest;
    return s;
  }
};

TEST_F(RunRecorderTest, RecordsJoinsLeavesLossesEvictionsAndAbortsWithTheirReasons) {
  const PeerId a = joined(), b = joined(), c = joined(), d = joined(1);
  (void)d;
  forget(a, "left gracefully (done)", true);
  forget(b, "connection lost (reset by peer)", false);
  forget(c, "evicted: no ring of group 0 avoids its unreachable links", false);
  rec.aborted(0, 7, "peer 2 lost", now);
  rec.aborted(0, 7, "peer 2 lost", now);  // the copy to another member: the same event
  const RunStatus s = build();
  std::vector<std::string> kinds;
  for (const auto& e : s.events) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"join", "join", "join", "join", "leave", "lost",
                                             "evicted", "abort"}));
  EXPECT_EQ(s.events[5].reason, "connection lost (reset by peer)");
  EXPECT_EQ(s.events[6].peer, c);
  EXPECT_EQ(s.events[7].epoch, 7u);
  EXPECT_EQ(s.event_totals.at("join"), 4u);
  EXPECT_EQ(s.event_totals.at("abort"), 1u);
  ASSERT_EQ(s.peers.size(), 1u) << "only d is still a member";
  EXPECT_EQ(s.peers[0].group, 1u);
  EXPECT_EQ(s.peers[0].node, "10.0.0.4") << "a peer without a node shows under its host";
  EXPECT_EQ(s.connections, 3u);
  EXPECT_EQ(s.groups.at(1).revision, std::optional<uint64_t>(4));
}

TEST_F(RunRecorderTest, RanksOfANodeShowUnderTheNodesName) {
  for (uint32_t rail = 0; rail < 2; ++rail) {
    const PeerId id = m.allocate_id();
    rec.joined(id, rail, now);
    m.add_pending(id, rail, "10.0.0.9", static_cast<uint16_t>(2000 + rail),
                  NodeClaim{"gpu-box-3", rail, 2, rail, "10.0.0.9"});
  }
  const PeerId plain = joined();
  const RunStatus s = build();
  ASSERT_EQ(s.peers.size(), 3u);
  for (const auto& p : s.peers)
    EXPECT_EQ(p.node, p.id == plain ? "10.0.0." + std::to_string(plain) : "gpu-box-3");
}

TEST_F(RunRecorderTest, RatesComeFromTwoConsecutiveReportsAndDepartedBytesStayCounted) {
  const auto ids = form(2);
  rec.stats(ids[0], stats(1000, 1, 9), now);
  RunStatus s = build();
  EXPECT_EQ(s.peers[0].data_send_rate, 0) << "one report gives no rate";
  now += 2;
  auto second = stats(5000, 1, 9);
  second.links = {{ids[1], 2, 1500, 1 << 20, 4000, 100, 0}};
  rec.stats(ids[0], second, now);
  s = build();
  EXPECT_DOUBLE_EQ(s.peers[0].data_send_rate, 2000);
  ASSERT_EQ(s.links.size(), 1u);
  EXPECT_EQ(s.links[0].from, ids[0]);
  EXPECT_EQ(s.links[0].to, ids[1]);
  EXPECT_EQ(s.links[0].stats.rtt_us, 1500u);
  EXPECT_EQ(s.data_bytes_sent, 5000u);
  forget(ids[0], "connection lost (eof)", false);
  s = build();
  EXPECT_EQ(s.data_bytes_sent, 5000u) << "a departed peer's bytes stay in the run's total";
  EXPECT_TRUE(s.links.empty());
}

TEST_F(RunRecorderTest, AMemberWhoseStateDiffersFromItsGroupsMostCommonIsMarked) {
  const auto ids = form(3);
  rec.stats(ids[0], stats(0, 5, 0xAA), now);
  rec.stats(ids[1], stats(0, 5, 0xAA), now);
  rec.stats(ids[2], stats(0, 5, 0xBB), now);
  const RunStatus s = build();
  EXPECT_FALSE(s.peers[0].state_mismatch);
  EXPECT_FALSE(s.peers[1].state_mismatch);
  EXPECT_TRUE(s.peers[2].state_mismatch);
  EXPECT_EQ(s.groups.at(0).state_mismatches, 1u);
}

TEST_F(RunRecorderTest, EpochChangesAreEventsAndWhatItKeepsIsBounded) {
  form(2);
  RunStatus s = build();
  EXPECT_EQ(s.events.back().kind, "epoch");
  EXPECT_EQ(s.events.back().epoch, m.epoch());
  for (size_t i = 0; i < RunRecorder::kMaxEvents + 50; ++i) rec.aborted(0, i, "x", now);
  for (size_t i = 0; i < RunRecorder::kMaxThroughputSamples + 50; ++i) s = build();
  EXPECT_EQ(s.events.size(), RunRecorder::kMaxEvents);
  EXPECT_EQ(s.throughput.size(), RunRecorder::kMaxThroughputSamples);
  EXPECT_EQ(s.event_totals.at("abort"), RunRecorder::kMaxEvents + 50) << "totals are not bounded";
}

}  // namespace
}  // namespace longhaul::master
