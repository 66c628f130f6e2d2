// The control-message schema: every message round-trips, and every malformed input is refused.
#include "wire/control_messages.hpp"

#include <gtest/gtest.h>

#include <random>

#include "wire/codec.hpp"

namespace longhaul::wire {
namespace {

// A REJOIN of a member whose master was lost while it linked for the next epoch.
RejoinMsg rejoin() {
  RejoinMsg m;
  m.peer_id = 5;
  m.group = 1;
  m.advertised_host = "10.0.0.5";
  m.advertised_port = 4000;
  m.epoch = 12;
  m.world = 4;
  m.ring = {3, 5, 7};
  m.proposed_epoch = 13;
  m.proposed_ring = {5, 7};
  m.decided_attempt = 2;
  m.decided_ok = true;
  return m;
}

// A REJOIN from rail 1 of a node of 2 rails, with its last node agreement answer.
RejoinMsg rail_rejoin() {
  RejoinMsg m = rejoin();
  m.node = "host-3";
  m.rail = 1;
  m.rails = 2;
  m.node_answered = 9;
  m.node_answer = 3;
  return m;
}

// A PEER_STATS with every field set to a distinct value.
PeerStatsMsg full_peer_stats() {
  PeerStatsMsg m{9,  1,  2,  3,  4,  5,  6,  true, 7,  8,  true, 9,
                 10, 11, 12, 13, 14, 15, 16, 17,   18, 19, {}};
  m.links = {{2, 4, 1500, 1u << 20, 99, 98, 1}, {5, 1, 20, 0, 0, 0, 0}};
  return m;
}

std::vector<ControlMessage> samples() {
  return {
      RegisterMsg{3, "203.0.113.7", 40000, "", 0, 1},
      RegisterMsg{1, "", 40001, "host-7", 1, 2},
      WelcomeMsg{42, 250, 5},
      HeartbeatMsg{},
      UpdateTopologyMsg{7},
      UpdateTopologyMsg{7, false},
      TopologyUnchangedMsg{7},
      TopologyMsg{
          9, {{1, 0, "a", 1}, {2, 1, "b", 2}, {3, 0, "c", 3}}, {{0, {3, 1}}, {1, {2}}}, 0, {}},
      TopologyMsg{9, {{4, 0, "d", 4}}, {{0, {4}}}, 8, {2, 5}},
      LinksReadyMsg{9, {2, 3}},
      EpochCommitMsg{9, 100, true},
      AbortMsg{9, 1, LH_ERR_ABORTED, "peer 4 left"},
      PendingChangedMsg{true},
      ReportPeerLostMsg{9, 4, "reset"},
      AbortRequestMsg{9, "the operation (epoch 9, number 3) did not finish within its timeout"},
      LeaveMsg{"done"},
      ByeMsg{},
      RemovedMsg{LH_ERR_TIMEOUT, "too slow"},
      PeerHelloMsg{9, 1},
      PeerHelloAckMsg{9, 3},
      StateReportMsg{
          9,
          1u << 20,
          4,
          SyncStrategy::kSendOnly,
          {{"a", 0, 300000, {11, 12}, {0x02}}, {"b", 8, 1, {13}, {0}}, {"c", 5, 0, {}, {}}}},
      StatePlanMsg{9,
                   LH_OK,
                   "",
                   5,
                   {{2, "h", 7}, {3, "i", 8}},
                   {{0, {3, 2}, {{1, 12, true}}}, {1, {2}, {{0, 13, false}}}}},
      StatePlanMsg{9, LH_ERR_STATE_MISMATCH, "tensor 'a' differs", 0, {}, {}},
      StateDoneMsg{9, LH_ERR_PEER_LOST, "no source left"},
      StateCompleteMsg{9},
      StateFetchMsg{77, 1, 16, 8, false},
      StateBlocksZMsg{77, {{true, {std::byte{1}, std::byte{2}}}, {false, {}}}},
      StateFetchFailedMsg{77, LH_ERR_ABORTED, "not in a sync"},
      BatchReportMsg{9, 1, true},
      BatchReportMsg{9, 3, false},
      BatchReportMsg{9, 4, false, true},
      BatchDecisionMsg{9, 2, true},
      BatchDecisionMsg{9, 3, false},
      StateSourceLostMsg{9, 4},
      NodeWaitingMsg{4, {0, 2}},
      NodeAgreeMsg{1, 1, 0},
      NodeAgreeMsg{UINT64_MAX, 0xFFFFFFFFu, 0xFFFFFFFFu},
      NodeAgreedMsg{7, 1},
      RemovedMsg{LH_ERR_NODE_EVICTED, "node 'a' evicted"},
      PeerStatsMsg{},
      full_peer_stats(),
      rejoin(),
      rail_rejoin(),
  };
}

TEST(ControlMessages, RejoinsThatCannotBeTrueAreRefused) {
  auto refused = [](const RejoinMsg& m) { return !decode_control(encode_control(m)).is_ok(); };
  EXPECT_FALSE(refused(rejoin()));
  EXPECT_FALSE(refused(rail_rejoin()));
  auto rail = rail_rejoin();
  rail.rails = 1;
  rail.node = "";
  rail.rail = 0;
  EXPECT_TRUE(refused(rail)) << "a node agreement answer from a peer of no node of several rails";
  rail = rail_rejoin();
  rail.node_answered = 0;
  EXPECT_TRUE(refused(rail)) << "an answer without its point";
  auto r = rejoin();
  r.ring = {3, 4};
  EXPECT_TRUE(refused(r)) << "a ring without the peer";
  r = rejoin();
  r.ring = {5, 5};
  EXPECT_TRUE(refused(r)) << "a peer twice";
  r = rejoin();
  r.epoch = 0;
  EXPECT_TRUE(refused(r)) << "never admitted";
  r = rejoin();
  r.proposed_epoch = r.epoch;
  EXPECT_TRUE(refused(r)) << "a proposal not newer than the epoch";
  r = rejoin();
  r.world = 1;
  EXPECT_TRUE(refused(r)) << "a world smaller than the ring";
  r = rejoin();
  r.rails = 2;
  EXPECT_TRUE(refused(r)) << "rails without a node";
}

TEST(ControlMessages, EveryMessageRoundTrips) {
  for (const auto& m : samples()) {
    const auto bytes = encode_control(m);
    auto back = decode_control(bytes);
    ASSERT_TRUE(back.is_ok()) << control_type_name(control_type(m)) << ": "
                              << back.status().to_string();
    EXPECT_EQ(back->index(), m.index());
    EXPECT_EQ(encode_control(*back), bytes) << control_type_name(control_type(m));
  }
}

TEST(ControlMessages, PeerStatsCarryTheOverlapsFigures) {
  PeerStatsMsg m = full_peer_stats();
  m.delay = 0xFFFFFFFFu;  // each at its widest: nothing is narrowed on the way
  m.delay_needed = 0xFFFFFFFEu;
  m.delay_changes = UINT64_MAX;
  m.sync_time_ns = 1'234'567'890'123ULL;
  m.step_time_ns = UINT64_MAX - 1;
  auto back = decode_control(encode_control(m));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const auto& b = std::get<PeerStatsMsg>(*back);
  EXPECT_EQ(b.blocked_ns, 14u);
  EXPECT_EQ(b.delay, 0xFFFFFFFFu);
  EXPECT_EQ(b.delay_needed, 0xFFFFFFFEu);
  EXPECT_EQ(b.delay_changes, UINT64_MAX);
  EXPECT_EQ(b.sync_time_ns, 1'234'567'890'123ULL);
  EXPECT_EQ(b.step_time_ns, UINT64_MAX - 1);
  ASSERT_EQ(b.links.size(), 2u) << "the links still follow the engine's figures";
  EXPECT_EQ(b.links[0].peer_id, 2u);
  EXPECT_EQ(b.links[1].peer_id, 5u);
}

TEST(ControlMessages, EngineFiguresWithoutAnEngineAreRefused) {
  auto refused = [](const PeerStatsMsg& m) { return !decode_control(encode_control(m)).is_ok(); };
  PeerStatsMsg m;
  EXPECT_FALSE(refused(m)) << "no engine, no figures";
  m.has_engine = true;
  EXPECT_FALSE(refused(m)) << "an engine before its first step";
  for (auto field :
       {&PeerStatsMsg::inner_steps, &PeerStatsMsg::blocked_ns, &PeerStatsMsg::delay_changes,
        &PeerStatsMsg::sync_time_ns, &PeerStatsMsg::step_time_ns}) {
    PeerStatsMsg f;
    f.*field = 1;
    EXPECT_TRUE(refused(f));
    f.has_engine = true;
    EXPECT_FALSE(refused(f));
  }
  for (auto field : {&PeerStatsMsg::delay, &PeerStatsMsg::delay_needed}) {
    PeerStatsMsg f;
    f.*field = 3;
    EXPECT_TRUE(refused(f)) << "a round delay without an engine";
    f.has_engine = true;
    EXPECT_FALSE(refused(f));
  }
}

TEST(ControlMessages, EveryTruncationAndTrailingByteIsRefused) {
  for (const auto& m : samples()) {
    const auto bytes = encode_control(m);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      auto r = decode_control(std::span(bytes).first(cut));
      EXPECT_FALSE(r.is_ok()) << control_type_name(control_type(m)) << " cut at " << cut;
      if (!r) {
        EXPECT_EQ(r.status().code(), LH_ERR_PROTOCOL);
      }
    }
    auto longer = bytes;
    longer.push_back(std::byte{0});
    EXPECT_FALSE(decode_control(longer).is_ok()) << control_type_name(control_type(m));
  }
}

TEST(ControlMessages, InconsistentTopologiesAreRefused) {
  auto refused = [](const TopologyMsg& t) { return !decode_control(encode_control(t)).is_ok(); };
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}, {1, 0, "a", 1}}, {{0, {1}}}, 0, {}}))
      << "duplicate member";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}}, {{0, {2}}}, 0, {}})) << "ring names a stranger";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}, {2, 0, "b", 1}}, {{0, {1}}}, 0, {}}))
      << "member missing from its ring";
  EXPECT_TRUE(refused({1, {{1, 1, "a", 1}}, {{0, {1}}}, 0, {}}))
      << "member in another group's ring";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}}, {{0, {1, 1}}}, 0, {}})) << "placed twice";
  EXPECT_TRUE(refused({1, {{0, 0, "a", 1}}, {{0, {0}}}, 0, {}})) << "peer id 0";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}}, {{0, {1}}, {0, {}}}, 0, {}}))
      << "two rings for a group";
  EXPECT_FALSE(refused({1, {{1, 0, "a", 1}}, {{0, {1}}}, 0, {}}));
}

TEST(ControlMessages, UpdateTopologyCarriesTheAdmissionFlag) {
  auto back = decode_control(encode_control(UpdateTopologyMsg{7, false}));
  ASSERT_TRUE(back.is_ok());
  EXPECT_FALSE(std::get<UpdateTopologyMsg>(*back).admit_joiners);
  back = decode_control(encode_control(UpdateTopologyMsg{7}));
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(std::get<UpdateTopologyMsg>(*back).admit_joiners) << "admits by default";
}

TEST(ControlMessages, NodeAgreementPointZeroIsRefused) {
  EXPECT_FALSE(decode_control(encode_control(NodeAgreeMsg{0, 1, 1})).is_ok());
  EXPECT_FALSE(decode_control(encode_control(NodeAgreedMsg{0, 1})).is_ok());
  auto back = decode_control(encode_control(NodeAgreedMsg{3, 5}));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(std::get<NodeAgreedMsg>(*back).point, 3u);
  EXPECT_EQ(std::get<NodeAgreedMsg>(*back).flags, 5u);
}

TEST(ControlMessages, AnAbortRequestOutsideAnEpochIsRefused) {
  EXPECT_FALSE(decode_control(encode_control(AbortRequestMsg{0, "timed out"})).is_ok());
  auto back = decode_control(encode_control(AbortRequestMsg{4, "timed out"}));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(std::get<AbortRequestMsg>(*back).epoch, 4u);
  EXPECT_EQ(std::get<AbortRequestMsg>(*back).reason, "timed out");
}

TEST(ControlMessages, BatchOutcomesOutsideAnAttemptAreRefused) {
  auto refused = [](const ControlMessage& m) { return !decode_control(encode_control(m)).is_ok(); };
  EXPECT_TRUE(refused(BatchReportMsg{0, 1, true})) << "epoch 0";
  EXPECT_TRUE(refused(BatchReportMsg{1, 0, true})) << "attempt 0";
  EXPECT_TRUE(refused(BatchDecisionMsg{0, 1, false})) << "epoch 0";
  EXPECT_TRUE(refused(BatchDecisionMsg{1, 0, false})) << "attempt 0";
  auto bytes = encode_control(BatchDecisionMsg{1, 1, true});
  bytes.back() = std::byte{2};
  EXPECT_FALSE(decode_control(bytes).is_ok()) << "a flag that is neither 0 nor 1";
  auto back = decode_control(encode_control(BatchReportMsg{4, 2, false}));
  ASSERT_TRUE(back.is_ok());
  const auto& report = std::get<BatchReportMsg>(*back);
  EXPECT_EQ(report.epoch, 4u);
  EXPECT_EQ(report.attempt, 2u);
  EXPECT_FALSE(report.ok);
  EXPECT_FALSE(report.late);
  back = decode_control(encode_control(BatchReportMsg{4, 3, false, true}));
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(std::get<BatchReportMsg>(*back).late) << "the member's deadline passed";
}

TEST(ControlMessages, InconsistentStateMessagesAreRefused) {
  auto refused = [](const ControlMessage& m) { return !decode_control(encode_control(m)).is_ok(); };
  const TensorReport a{"a", 0, 10, {1}, {0}};
  const TensorReport b{"b", 0, 10, {1}, {0}};
  EXPECT_FALSE(refused(StateReportMsg{1, 1, 0, SyncStrategy::kEnforcePopular, {a, b}}));
  EXPECT_TRUE(refused(StateReportMsg{1, 1, 0, SyncStrategy::kEnforcePopular, {b, a}}))
      << "names not ascending";
  EXPECT_TRUE(refused(StateReportMsg{1, 1, 0, SyncStrategy::kEnforcePopular, {a, a}}))
      << "name twice";
  EXPECT_TRUE(
      refused(StateReportMsg{1, 1, 0, SyncStrategy::kEnforcePopular, {{"", 0, 10, {1}, {0}}}}))
      << "empty name";
  EXPECT_TRUE(
      refused(StateReportMsg{1, 1, 0, SyncStrategy::kEnforcePopular, {{"x", 10, 10, {1}, {0}}}}))
      << "unknown dtype";
  EXPECT_TRUE(
      refused(StateReportMsg{1, 1, 0, SyncStrategy::kEnforcePopular, {{"x", 0, 10, {1, 2}, {}}}}))
      << "bitmap shorter than the blocks";
  EXPECT_TRUE(refused(StateReportMsg{1, 1, 0, static_cast<SyncStrategy>(3), {}}))
      << "unknown strategy";
  const std::vector<StateSource> sources = {{2, "h", 7}};
  EXPECT_TRUE(refused(StatePlanMsg{1, LH_OK, "", 1, sources, {{0, {9}, {{0, 1, false}}}}}))
      << "unlisted source";
  EXPECT_TRUE(refused(StatePlanMsg{1, LH_OK, "", 1, sources, {{0, {}, {{0, 1, false}}}}}))
      << "no source";
  EXPECT_TRUE(refused(StatePlanMsg{1, LH_OK, "", 1, sources, {{0, {2}, {}}}})) << "no blocks";
  EXPECT_TRUE(
      refused(StatePlanMsg{1, LH_OK, "", 1, sources, {{0, {2}, {{3, 1, false}, {3, 1, false}}}}}))
      << "block twice";
  EXPECT_TRUE(refused(StatePlanMsg{
      1, LH_OK, "", 1, sources, {{1, {2}, {{0, 1, false}}}, {0, {2}, {{0, 1, false}}}}}))
      << "tensors out of order";
  EXPECT_TRUE(refused(StatePlanMsg{1, LH_OK, "", 1, {{2, "h", 7}, {2, "h", 7}}, {}}))
      << "source twice";
  EXPECT_TRUE(refused(StatePlanMsg{1, LH_OK, "", 1, {{2, "h", 0}}, {}})) << "source port 0";
  EXPECT_TRUE(
      refused(StatePlanMsg{1, LH_ERR_ABORTED, "x", 1, sources, {{0, {2}, {{0, 1, false}}}}}))
      << "a refusal with fetches";
  EXPECT_TRUE(refused(StateFetchMsg{1, 0, 0, 0, false})) << "zero blocks";
  EXPECT_TRUE(refused(StateFetchMsg{1, 0, 0, kMaxBlocksPerCompressedFetch + 1, true}))
      << "compressed too many";
  EXPECT_TRUE(refused(StateFetchMsg{1, 0, 0xFFFFFFFFu, 2, false})) << "block range overflows";
  EXPECT_TRUE(refused(StateFetchFailedMsg{1, LH_OK, "ok is not a failure"}));
  std::vector<CompressedBlock> five(kMaxBlocksPerCompressedFetch + 1);
  EXPECT_TRUE(refused(StateBlocksZMsg{1, five})) << "more blocks than a compressed fetch asks for";
  EXPECT_TRUE(refused(StateSourceLostMsg{1, 0})) << "peer 0";
  EXPECT_TRUE(refused(StateSourceLostMsg{0, 4})) << "epoch 0";
  PeerStatsMsg stats;
  stats.links = {{3, 1, 0, 0, 0, 0, 0}, {3, 1, 0, 0, 0, 0, 0}};
  EXPECT_TRUE(refused(stats)) << "a link listed twice";
  stats.links = {{3, 1, 0, 0, 0, 0, 0}, {2, 1, 0, 0, 0, 0, 0}};
  EXPECT_TRUE(refused(stats)) << "links out of order";
  stats.links = {{0, 1, 0, 0, 0, 0, 0}};
  EXPECT_TRUE(refused(stats)) << "a link to peer 0";
  stats.links.assign(kMaxStatsLinks + 1, {});
  for (size_t i = 0; i < stats.links.size(); ++i) stats.links[i].peer_id = i + 1;
  EXPECT_TRUE(refused(stats)) << "more links than kMaxStatsLinks";
}

TEST(ControlMessages, HostileLengthsAndValuesAreRefused) {
  Writer huge_host;
  huge_host.u8(static_cast<uint8_t>(ControlType::kRegister));
  huge_host.u32(0);
  huge_host.string(std::string(kMaxHostBytes + 1, 'h'));
  huge_host.u16(1);
  EXPECT_FALSE(decode_control(huge_host.buffer()).is_ok());

  Writer huge_count;
  huge_count.u8(static_cast<uint8_t>(ControlType::kLinksReady));
  huge_count.u64(1);
  huge_count.u32(0xFFFFFFFFu);
  EXPECT_FALSE(decode_control(huge_count.buffer()).is_ok());

  EXPECT_FALSE(decode_control(encode_control(RemovedMsg{LH_OK, "ok is not a reason"})).is_ok());
  EXPECT_FALSE(decode_control(encode_control(WelcomeMsg{0, 1000, 3})).is_ok());
  EXPECT_FALSE(decode_control(encode_control(WelcomeMsg{1, 0, 3})).is_ok());
  const std::vector<std::byte> unknown = {std::byte{0xEE}};
  auto r = decode_control(unknown);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unknown control message type"), std::string::npos);
  EXPECT_FALSE(decode_control({}).is_ok());
}

TEST(ControlMessages, RandomInputNeverCrashes) {
  std::mt19937_64 rng(1234);
  size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> bytes(rng() % 80);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    if (!bytes.empty()) bytes[0] = static_cast<std::byte>(rng() % 25);
    auto r = decode_control(bytes);
    if (r) {
      ++accepted;
      EXPECT_EQ(encode_control(*r), bytes)
          << "an accepted message must re-encode to the same bytes";
    }
  }
  EXPECT_GT(accepted, 0u);  // heartbeats and byes are one byte; some random inputs are valid
}

}  // namespace
}  // namespace longhaul::wire
