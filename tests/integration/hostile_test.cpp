// Bad and hostile clients against a real longhaul-master process: a wrong secret, a wrong protocol
// version, random bytes, truncated frames, and authenticated links sending garbage control
// messages. Each is refused with a clear reason; the master keeps running and admits normal peers.
#include <signal.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include "cluster.hpp"
#include "net/endpoint.hpp"
#include "net/frame.hpp"
#include "net/handshake.hpp"
#include "wire/codec.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// A plain blocking TCP client with a receive timeout.
struct RawClient {
  asio::io_context io;
  asio::ip::tcp::socket socket{io};

  explicit RawClient(uint16_t port) {
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
    timeval tv{2, 0};
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void write(std::span<const std::byte> data) {
    asio::error_code ec;
    asio::write(socket, asio::buffer(data.data(), data.size()), ec);
  }
  void write_frame(net::FrameType type, const std::vector<std::byte>& payload) {
    net::FrameHeader h;
    h.type = type;
    h.length = static_cast<uint32_t>(payload.size());
    const auto header = net::encode_header(h);
    write(header);
    write(payload);
  }
  // The next frame from the server, or the error that ended the stream.
  Result<std::pair<net::FrameHeader, std::vector<std::byte>>> read_frame() {
    net::EncodedHeader raw;
    asio::error_code ec;
    asio::read(socket, asio::buffer(raw), ec);
    if (ec) return peer_lost(ec.message());
    net::FrameHeader h;
    LH_RETURN_IF_ERROR(net::decode_header(raw, net::FrameLimits{}, &h));
    std::vector<std::byte> payload(h.length);
    asio::read(socket, asio::buffer(payload), ec);
    if (ec) return peer_lost(ec.message());
    return std::make_pair(h, std::move(payload));
  }
  // True once the server has closed the connection (reads EOF), skipping any frames it sends.
  bool closed_by_server() {
    for (int i = 0; i < 8; ++i) {
      std::array<std::byte, 256> buf;
      asio::error_code ec;
      socket.read_some(asio::buffer(buf), ec);
      if (ec == asio::error::eof || ec == asio::error::connection_reset) return true;
      if (ec) return false;  // timeout
    }
    return false;
  }
};

std::string write_secret(const TempDir& dir, const std::string& secret) {
  const std::string path = dir.path() + "/secret";
  std::ofstream(path) << secret << "\n";
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path;
}

bool is_error(const std::string& line, const std::string& status) {
  return line.rfind("ERROR " + status, 0) == 0;
}

TEST(Rejection, WrongSecretWrongVersionAndRandomBytesAreRefusedAndTheRunGoesOn) {
  TempDir secrets;
  Cluster cluster({"--secret-file", write_secret(secrets, "right cluster secret")});
  Child& good = cluster.add_peer({"--secret", "right cluster secret"});
  ASSERT_TRUE(cluster.wait_agreement({&good}, 1));

  Child& wrong = cluster.add_peer({"--secret", "wrong cluster secret"});
  EXPECT_EQ(wrong.wait_exit(30s), 3);
  EXPECT_TRUE(is_error(wrong.last_line("ERROR"), "LH_ERR_AUTH")) << wrong.last_line("ERROR");
  EXPECT_NE(wrong.last_line("ERROR").find("secret"), std::string::npos) << wrong.last_line("ERROR");

  Child& none = cluster.add_peer();
  EXPECT_EQ(none.wait_exit(30s), 3);
  EXPECT_TRUE(is_error(none.last_line("ERROR"), "LH_ERR_AUTH")) << none.last_line("ERROR");

  {  // A client speaking protocol version 99.
    RawClient client(cluster.port());
    net::HelloMessage hello;
    hello.version = 99;
    client.write_frame(net::FrameType::kHello, net::encode(hello));
    auto reply = client.read_frame();
    ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
    ASSERT_EQ(reply->first.type, net::FrameType::kReject);
    net::RejectMessage reject;
    ASSERT_TRUE(net::decode(reply->second, &reject).is_ok());
    EXPECT_EQ(reject.code, LH_ERR_PROTOCOL);
    EXPECT_NE(reject.reason.find("version"), std::string::npos) << reject.reason;
    EXPECT_TRUE(client.closed_by_server());
  }
  {  // Random bytes instead of a handshake.
    std::mt19937_64 rng(7);
    RawClient client(cluster.port());
    client.write(random_bytes(rng, 1000));
    EXPECT_TRUE(client.closed_by_server());
  }

  Child& late = cluster.add_peer({"--secret", "right cluster secret"});
  ASSERT_TRUE(cluster.wait_agreement({&good, &late}, 2));
  EXPECT_TRUE(cluster.master().running());
  const std::string log = cluster.master().stderr_text();
  EXPECT_NE(log.find("wrong secret"), std::string::npos) << log;
  EXPECT_NE(log.find("protocol version mismatch"), std::string::npos) << log;
}

// Encodings of control messages, cut or corrupted in every way a fuzzer would find.
std::vector<std::vector<std::byte>> hostile_control_messages(std::mt19937_64& rng) {
  using namespace wire;
  std::vector<ControlMessage> valid = {
      RegisterMsg{0, "127.0.0.1", 1, "", 0, 1},
      WelcomeMsg{1, 1000, 3},
      HeartbeatMsg{},
      UpdateTopologyMsg{1},
      TopologyUnchangedMsg{1},
      TopologyMsg{5, {{1, 0, "h", 1}, {2, 0, "h", 2}}, {{0, {1, 2}}}, 0, {}},
      LinksReadyMsg{123456, {1, 2, 3}},
      EpochCommitMsg{1, 0, false},
      AbortMsg{1, 0, LH_ERR_PEER_LOST, "x"},
      PendingChangedMsg{true},
      ReportPeerLostMsg{1, 99, "gone"},
      ByeMsg{},
      RemovedMsg{LH_ERR_AUTH, "no"},
      PeerHelloMsg{1, 1},
      PeerHelloAckMsg{1, 1},
      UpdateTopologyMsg{1, false},
      BatchReportMsg{1, 1, true},
      BatchReportMsg{99, 7, false},
      BatchDecisionMsg{1, 1, true},
      NodeAgreeMsg{1, 1, 1},
      NodeAgreedMsg{1, 1},
  };
  std::vector<std::vector<std::byte>> out;
  out.push_back({});                              // empty message
  out.push_back({std::byte{0}});                  // tag 0
  out.push_back({std::byte{200}, std::byte{1}});  // unknown tag
  for (const auto& m : valid) {
    auto bytes = encode_control(m);
    out.push_back(bytes);                                  // valid but not for the master
    for (int cut = 0; cut < 3 && bytes.size() > 1; ++cut)  // truncated
      out.emplace_back(bytes.begin(),
                       bytes.begin() + static_cast<long>(1 + rng() % (bytes.size() - 1)));
    auto longer = bytes;  // trailing garbage
    longer.push_back(std::byte{0x5A});
    out.push_back(longer);
    auto flipped = bytes;  // a corrupted byte after the tag
    if (flipped.size() > 1) flipped[1 + rng() % (flipped.size() - 1)] ^= std::byte{0xFF};
    out.push_back(flipped);
  }
  {  // Lengths and counts that claim far more than is there.
    Writer w;
    w.u8(static_cast<uint8_t>(ControlType::kRegister));
    w.u32(0);
    w.u32(0xFFFFFFFF);
    out.push_back(w.take());
    Writer t;
    t.u8(static_cast<uint8_t>(ControlType::kLinksReady));
    t.u64(1);
    t.u32(0x7FFFFFFF);
    out.push_back(t.take());
  }
  for (int i = 0; i < 40; ++i) {  // random tag + random body
    auto bytes = random_bytes(rng, rng() % 64);
    bytes.insert(bytes.begin(), static_cast<std::byte>(1 + rng() % 16));
    out.push_back(bytes);
  }
  return out;
}

TEST(MasterFuzz, SurvivesRandomTruncatedAndHostileMessagesAndStillAdmitsPeers) {
  Cluster cluster;
  Child& good = cluster.add_peer();
  ASSERT_TRUE(cluster.wait_agreement({&good}, 1));
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);

  // Unauthenticated garbage: random bytes, and frames cut short.
  for (int i = 0; i < 60; ++i) {
    RawClient client(cluster.port());
    switch (i % 4) {
      case 0:
        client.write(random_bytes(rng, rng() % 4096));
        break;
      case 1: {  // a HELLO header promising more payload than is sent
        net::FrameHeader h;
        h.type = net::FrameType::kHello;
        h.length = 200;
        client.write(net::encode_header(h));
        client.write(random_bytes(rng, rng() % 50));
        break;
      }
      case 2: {  // half a header
        net::FrameHeader h;
        h.type = net::FrameType::kHello;
        auto header = net::encode_header(h);
        client.write(std::span(header).first(rng() % header.size()));
        break;
      }
      case 3: {  // a valid HELLO, then a random frame instead of AUTH
        client.write_frame(net::FrameType::kHello, net::encode(net::HelloMessage{}));
        client.write(random_bytes(rng, 64));
        break;
      }
    }
  }

  // Authenticated links that then send garbage control messages, one message per link, plus the
  // same after a valid REGISTER.
  runtime::IoRuntime io(2);
  net::TransportOptions options;
  auto messages = hostile_control_messages(rng);
  std::vector<std::shared_ptr<net::Link>> links;
  size_t dropped = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    auto link = net::connect_link(io, "127.0.0.1", cluster.port(), 1, options);
    ASSERT_TRUE(link.is_ok()) << link.status().to_string();
    (*link)->start();
    if (i % 2 == 1)
      (*link)->send_control(wire::encode_control(wire::RegisterMsg{0, "", 9, "", 0, 1}));
    (*link)->send_control(messages[i]);
    links.push_back(*link);
  }
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (auto& link : links) {
    while (link->failure().is_ok() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    if (!link->failure().is_ok()) ++dropped;
  }
  // Every message above is refused (malformed, one only the master sends, anything before
  // REGISTER, or out of order), except possibly a HEARTBEAT sent after a REGISTER, which is valid.
  EXPECT_GE(dropped + 1, links.size());
  for (auto& link : links) link->close();
  links.clear();

  {  // Links in another role, and a peer control link with several connections.
    net::TransportOptions tool = options;
    tool.role = net::Role::kTool;
    auto link = net::connect_link(io, "127.0.0.1", cluster.port(), 1, tool);
    ASSERT_TRUE(link.is_ok());
    (*link)->start();
    auto wide = net::connect_link(io, "127.0.0.1", cluster.port(), 3, options);
    ASSERT_TRUE(wide.is_ok());
    (*wide)->start();
    for (int i = 0; i < 400 && ((*link)->failure().is_ok() || (*wide)->failure().is_ok()); ++i)
      std::this_thread::sleep_for(5ms);
    EXPECT_FALSE((*link)->failure().is_ok());
    EXPECT_FALSE((*wide)->failure().is_ok());
  }

  ASSERT_TRUE(cluster.master().running()) << "the master died";
  Child& late = cluster.add_peer();
  ASSERT_TRUE(cluster.wait_agreement({&good, &late}, 2));
  const std::string log = cluster.master().stderr_text();
  EXPECT_NE(log.find("malformed"), std::string::npos);
  EXPECT_NE(log.find("expected REGISTER or REJOIN first"), std::string::npos);
}

}  // namespace
}  // namespace longhaul::testing
