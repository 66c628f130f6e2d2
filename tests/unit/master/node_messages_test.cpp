// The node fields of REGISTER and NODE_WAITING (protocol version 5): impossible claims are
// refused by the decoder, before the master looks at them.
#include <gtest/gtest.h>

#include "wire/codec.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::wire {
namespace {

bool refused(const ControlMessage& m) {
  return !decode_control(encode_control(m)).is_ok();
}

TEST(NodeMessages, RegisterCarriesTheNodeAndItsRail) {
  auto back = decode_control(encode_control(RegisterMsg{1, "", 7, "gpu-box", 3, 8}));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const auto& reg = std::get<RegisterMsg>(*back);
  EXPECT_EQ(reg.node, "gpu-box");
  EXPECT_EQ(reg.rail, 3u);
  EXPECT_EQ(reg.rails, 8u);
  EXPECT_TRUE(decode_control(encode_control(RegisterMsg{0, "", 7, "", 0, 1})).is_ok())
      << "a node of one";
}

TEST(NodeMessages, ImpossibleClaimsAreRefused) {
  EXPECT_TRUE(refused(RegisterMsg{0, "", 7, "n", 2, 2})) << "rail out of range";
  EXPECT_TRUE(refused(RegisterMsg{0, "", 7, "n", 0, 0})) << "a node of no rails";
  EXPECT_TRUE(refused(RegisterMsg{0, "", 7, "n", 0, kMaxRails + 1})) << "too many rails";
  EXPECT_TRUE(refused(RegisterMsg{0, "", 7, "", 0, 2})) << "rails without a node name";
  EXPECT_TRUE(refused(RegisterMsg{0, "", 7, std::string(kMaxNodeNameBytes + 1, 'n'), 0, 1}));
  const auto why = decode_control(encode_control(RegisterMsg{0, "", 7, "n", 4, 2})).status();
  EXPECT_EQ(why.code(), LH_ERR_PROTOCOL);
  EXPECT_NE(why.message().find("rail 4 out of range"), std::string::npos) << why.message();
}

TEST(NodeMessages, NodeWaitingNamesSomeButNotAllRailsInOrder) {
  EXPECT_FALSE(refused(NodeWaitingMsg{3, {0, 2}}));
  EXPECT_TRUE(refused(NodeWaitingMsg{2, {0, 1}})) << "a complete node does not wait";
  EXPECT_TRUE(refused(NodeWaitingMsg{2, {}})) << "nobody registered";
  EXPECT_TRUE(refused(NodeWaitingMsg{3, {2, 0}})) << "out of order";
  EXPECT_TRUE(refused(NodeWaitingMsg{3, {1, 1}})) << "twice";
  EXPECT_TRUE(refused(NodeWaitingMsg{3, {0, 3}})) << "out of range";
  EXPECT_TRUE(refused(NodeWaitingMsg{0, {0}}));
}

TEST(NodeMessages, NodeEvictedIsAStatusTheDecoderKnows) {
  EXPECT_FALSE(refused(RemovedMsg{LH_ERR_NODE_EVICTED, "node 'a' evicted"}));
  EXPECT_FALSE(refused(AbortMsg{3, 0, LH_ERR_NODE_EVICTED, "x"}));
  Writer w;
  w.u8(static_cast<uint8_t>(ControlType::kRemoved));
  w.u32(static_cast<uint32_t>(kLastStatus) + 1);
  w.string("unknown");
  EXPECT_FALSE(decode_control(w.buffer()).is_ok());
}

}  // namespace
}  // namespace longhaul::wire
