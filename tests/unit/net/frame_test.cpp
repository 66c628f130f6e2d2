#include "net/frame.hpp"

#include <gtest/gtest.h>

#include "net/handshake.hpp"

namespace longhaul::net {
namespace {

FrameHeader round_trip(const FrameHeader& h) {
  auto bytes = encode_header(h);
  FrameHeader out;
  Status s = decode_header(bytes, FrameLimits{}, &out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

TEST(Frame, EveryTypeRoundTrips) {
  for (uint8_t t = static_cast<uint8_t>(FrameType::kHello); t <= static_cast<uint8_t>(FrameType::kCancel); ++t) {
    FrameHeader h;
    h.type = static_cast<FrameType>(t);
    const bool body = h.type != FrameType::kPing && h.type != FrameType::kPong && h.type != FrameType::kCancel;
    h.length = body ? 17 : 0;
    h.op_id = 0x1122334455667788ULL;
    if (h.type == FrameType::kData) {
      h.offset = 5;
      h.total = 100;
    }
    FrameHeader out = round_trip(h);
    EXPECT_EQ(out.type, h.type) << frame_type_name(h.type);
    EXPECT_EQ(out.length, h.length);
    EXPECT_EQ(out.op_id, h.op_id);
    EXPECT_EQ(out.offset, h.offset);
    EXPECT_EQ(out.total, h.total);
  }
}

TEST(Frame, HeaderIsThirtyTwoLittleEndianBytes) {
  FrameHeader h{FrameType::kData, 0, 0x01020304, 7, 0, 0x01020304};
  auto bytes = encode_header(h);
  EXPECT_EQ(bytes.size(), 32u);
  EXPECT_EQ(bytes[0], std::byte{0x48});
  EXPECT_EQ(bytes[1], std::byte{0x4C});
  EXPECT_EQ(bytes[4], std::byte{0x04});
}

Status decode_bytes(EncodedHeader bytes, FrameLimits limits = {}) {
  FrameHeader out;
  return decode_header(bytes, limits, &out);
}

TEST(Frame, RejectsBadMarkerUnknownTypeAndFlags) {
  auto bytes = encode_header(FrameHeader{FrameType::kControl, 0, 0, 0, 0, 0});
  auto bad_marker = bytes;
  bad_marker[0] = std::byte{0};
  EXPECT_EQ(decode_bytes(bad_marker).code(), LH_ERR_PROTOCOL);
  auto bad_type = bytes;
  bad_type[2] = std::byte{99};
  EXPECT_EQ(decode_bytes(bad_type).code(), LH_ERR_PROTOCOL);
  auto bad_flags = bytes;
  bad_flags[3] = std::byte{1};
  EXPECT_EQ(decode_bytes(bad_flags).code(), LH_ERR_PROTOCOL);
}

TEST(Frame, EnforcesLengthLimitsPerType) {
  FrameLimits limits;
  limits.max_control_payload = 100;
  limits.max_data_payload = 1000;
  EXPECT_TRUE(decode_bytes(encode_header({FrameType::kControl, 0, 100, 0, 0, 0}), limits).is_ok());
  EXPECT_EQ(decode_bytes(encode_header({FrameType::kControl, 0, 101, 0, 0, 0}), limits).code(), LH_ERR_PROTOCOL);
  EXPECT_EQ(decode_bytes(encode_header({FrameType::kData, 0, 1001, 0, 0, 5000}), limits).code(), LH_ERR_PROTOCOL);
  EXPECT_EQ(decode_bytes(encode_header({FrameType::kHello, 0, kMaxHandshakePayload + 1, 0, 0, 0})).code(),
            LH_ERR_PROTOCOL);
  EXPECT_EQ(decode_bytes(encode_header({FrameType::kPing, 0, 1, 0, 0, 0})).code(), LH_ERR_PROTOCOL);
  EXPECT_EQ(decode_bytes(encode_header({FrameType::kData, 0, 0xffffffff, 0, 0, ~0ull}), limits).code(),
            LH_ERR_PROTOCOL);
}

TEST(Frame, DataSegmentMustLieInsideItsOperation) {
  EXPECT_TRUE(decode_bytes(encode_header({FrameType::kData, 0, 10, 1, 90, 100})).is_ok());
  EXPECT_EQ(decode_bytes(encode_header({FrameType::kData, 0, 11, 1, 90, 100})).code(), LH_ERR_PROTOCOL);
  EXPECT_EQ(decode_bytes(encode_header({FrameType::kData, 0, 1, 1, ~0ull, 100})).code(), LH_ERR_PROTOCOL);
}

TEST(Handshake, MessagesRoundTrip) {
  HelloMessage hello;
  hello.role = Role::kMaster;
  hello.nonce = random_nonce();
  hello.link_id = 42;
  hello.connection_index = 3;
  hello.connection_count = 8;
  HelloMessage hello2;
  ASSERT_TRUE(decode(encode(hello), &hello2).is_ok());
  EXPECT_EQ(hello2.role, Role::kMaster);
  EXPECT_EQ(hello2.nonce, hello.nonce);
  EXPECT_EQ(hello2.link_id, 42u);
  EXPECT_EQ(hello2.connection_index, 3);
  EXPECT_EQ(hello2.connection_count, 8);

  HelloAckMessage ack;
  ack.secret_required = true;
  ack.nonce = random_nonce();
  ack.mac = compute_mac("s3cret", MacSide::kServer, hello, ack.nonce, {});
  HelloAckMessage ack2;
  ASSERT_TRUE(decode(encode(ack), &ack2).is_ok());
  EXPECT_TRUE(ack2.secret_required);
  EXPECT_TRUE(mac_equal(ack2.mac, ack.mac));

  RejectMessage reject{LH_ERR_AUTH, "wrong cluster secret"};
  RejectMessage reject2;
  ASSERT_TRUE(decode(encode(reject), &reject2).is_ok());
  EXPECT_EQ(reject2.code, LH_ERR_AUTH);
  EXPECT_EQ(reject2.reason, "wrong cluster secret");

  AuthMessage auth{ack.mac};
  AuthMessage auth2;
  ASSERT_TRUE(decode(encode(auth), &auth2).is_ok());
  EXPECT_TRUE(mac_equal(auth2.mac, ack.mac));
}

TEST(Handshake, MacDependsOnSecretSideNoncesAndChannel) {
  HelloMessage hello;
  hello.nonce = random_nonce();
  const Nonce server = random_nonce();
  const Mac base = compute_mac("a", MacSide::kServer, hello, server, {});
  EXPECT_TRUE(mac_equal(base, compute_mac("a", MacSide::kServer, hello, server, {})));
  EXPECT_FALSE(mac_equal(base, compute_mac("b", MacSide::kServer, hello, server, {})));
  EXPECT_FALSE(mac_equal(base, compute_mac("a", MacSide::kClient, hello, server, {})));
  EXPECT_FALSE(mac_equal(base, compute_mac("a", MacSide::kServer, hello, random_nonce(), {})));
  const std::byte binding[1] = {std::byte{1}};
  EXPECT_FALSE(mac_equal(base, compute_mac("a", MacSide::kServer, hello, server, binding)));
}

TEST(Handshake, TruncatedOrTrailingMessagesAreErrors) {
  HelloAckMessage ack;
  auto bytes = encode(ack);
  HelloAckMessage out;
  EXPECT_EQ(decode(std::span(bytes).first(bytes.size() - 1), &out).code(), LH_ERR_PROTOCOL);
  bytes.push_back(std::byte{0});
  EXPECT_EQ(decode(bytes, &out).code(), LH_ERR_PROTOCOL);
}

}  // namespace
}  // namespace longhaul::net
