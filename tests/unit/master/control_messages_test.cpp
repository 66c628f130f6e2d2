// The control-message schema: every message round-trips, and every malformed input is refused.
#include "wire/control_messages.hpp"

#include <gtest/gtest.h>

#include <random>

#include "wire/codec.hpp"

namespace longhaul::wire {
namespace {

std::vector<ControlMessage> samples() {
  return {
      RegisterMsg{3, "203.0.113.7", 40000},
      WelcomeMsg{42, 250, 5},
      HeartbeatMsg{},
      UpdateTopologyMsg{7},
      TopologyUnchangedMsg{7},
      TopologyMsg{9, {{1, 0, "a", 1}, {2, 1, "b", 2}, {3, 0, "c", 3}}, {{0, {3, 1}}, {1, {2}}}},
      LinksReadyMsg{9, {2, 3}},
      EpochCommitMsg{9, 100, true},
      AbortMsg{9, 1, "peer 4 left"},
      PendingChangedMsg{true},
      ReportPeerLostMsg{9, 4, "reset"},
      LeaveMsg{"done"},
      ByeMsg{},
      RemovedMsg{LH_ERR_TIMEOUT, "too slow"},
      PeerHelloMsg{9, 1},
      PeerHelloAckMsg{9, 3},
  };
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
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}, {1, 0, "a", 1}}, {{0, {1}}}})) << "duplicate member";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}}, {{0, {2}}}})) << "ring names a stranger";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}, {2, 0, "b", 1}}, {{0, {1}}}}))
      << "member missing from its ring";
  EXPECT_TRUE(refused({1, {{1, 1, "a", 1}}, {{0, {1}}}})) << "member in another group's ring";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}}, {{0, {1, 1}}}})) << "placed twice";
  EXPECT_TRUE(refused({1, {{0, 0, "a", 1}}, {{0, {0}}}})) << "peer id 0";
  EXPECT_TRUE(refused({1, {{1, 0, "a", 1}}, {{0, {1}}, {0, {}}}})) << "two rings for a group";
  EXPECT_FALSE(refused({1, {{1, 0, "a", 1}}, {{0, {1}}}}));
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
    if (!bytes.empty()) bytes[0] = static_cast<std::byte>(rng() % 18);
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
