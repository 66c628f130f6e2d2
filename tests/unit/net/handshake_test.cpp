// Every way a connection can fail to get in, and that the listener carries on afterwards.
#include <gtest/gtest.h>

#include <asio/connect.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <random>
#include <thread>

#include "net/handshake.hpp"
#include "test_support.hpp"

namespace longhaul::net {
namespace {

using runtime::IoRuntime;

using testing::Done;

class Refusals : public ::testing::Test {
 protected:
  void start_listener(TransportOptions options) {
    auto l = Listener::create(io_, "127.0.0.1", 0, options);
    ASSERT_TRUE(l.is_ok()) << l.status().to_string();
    listener_ = *l;
    listener_->start([this](std::shared_ptr<Link> link, Role) {
      std::lock_guard lock(mu_);
      link->start();
      accepted_.push_back(std::move(link));
    });
  }
  void TearDown() override {
    if (listener_) listener_->close();  // after this no accept handler runs
    for (auto& l : accepted_) l->close();
  }
  // The listener still admits a well-behaved client after whatever the test did.
  void expect_still_accepting(const TransportOptions& good) {
    auto link = connect_link(io_, "127.0.0.1", listener_->port(), 2, good);
    ASSERT_TRUE(link.is_ok()) << link.status().to_string();
    link.value()->close();
  }
  void expect_refusals(uint64_t n) {
    for (int i = 0; i < 200 && listener_->refused_count() < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(listener_->refused_count(), n);
  }
  // Sends raw bytes on a plain socket and returns what the listener answered (until it closed).
  std::vector<std::byte> raw_exchange(std::span<const std::byte> bytes) {
    asio::io_context ctx;
    asio::ip::tcp::socket s(ctx);
    s.connect({asio::ip::make_address("127.0.0.1"), listener_->port()});
    asio::write(s, asio::buffer(bytes.data(), bytes.size()));
    std::vector<std::byte> reply;
    std::array<std::byte, 4096> buf;
    asio::error_code ec;
    for (;;) {
      size_t n = s.read_some(asio::buffer(buf), ec);
      if (ec) break;
      reply.insert(reply.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n));
    }
    return reply;
  }

  IoRuntime io_{2};
  std::shared_ptr<Listener> listener_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Link>> accepted_;
};

TransportOptions with_secret(const std::string& secret) {
  TransportOptions o;
  o.secret = secret;
  o.handshake_timeout = std::chrono::milliseconds(500);
  return o;
}

TEST_F(Refusals, WrongSecretIsRefusedWithAClearReason) {
  start_listener(with_secret("right"));
  auto link = connect_link(io_, "127.0.0.1", listener_->port(), 3, with_secret("wrong"));
  ASSERT_FALSE(link.is_ok());
  EXPECT_EQ(link.status().code(), LH_ERR_AUTH) << link.status().to_string();
  EXPECT_NE(link.status().message().find("secret"), std::string::npos) << link.status().to_string();
  expect_refusals(3);
  expect_still_accepting(with_secret("right"));
}

TEST_F(Refusals, MissingSecretOnEitherSideIsRefused) {
  start_listener(with_secret("s"));
  auto none = connect_link(io_, "127.0.0.1", listener_->port(), 1, with_secret(""));
  EXPECT_EQ(none.status().code(), LH_ERR_AUTH) << none.status().to_string();
  listener_->close();
  start_listener(with_secret(""));
  auto extra = connect_link(io_, "127.0.0.1", listener_->port(), 1, with_secret("s"));
  EXPECT_EQ(extra.status().code(), LH_ERR_AUTH) << extra.status().to_string();
  expect_still_accepting(with_secret(""));
}

TEST_F(Refusals, WrongProtocolVersionGetsAReject) {
  start_listener(with_secret(""));
  HelloMessage hello;
  hello.version = kProtocolVersion + 1;
  auto payload = encode(hello);
  auto header =
      encode_header({FrameType::kHello, 0, static_cast<uint32_t>(payload.size()), 0, 0, 0});
  std::vector<std::byte> bytes(header.begin(), header.end());
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  auto reply = raw_exchange(bytes);
  ASSERT_GE(reply.size(), kFrameHeaderBytes);
  FrameHeader h;
  ASSERT_TRUE(
      decode_header(std::span<const std::byte, kFrameHeaderBytes>(reply.data(), kFrameHeaderBytes),
                    FrameLimits{}, &h)
          .is_ok());
  EXPECT_EQ(h.type, FrameType::kReject);
  RejectMessage reject;
  ASSERT_TRUE(decode(std::span(reply).subspan(kFrameHeaderBytes, h.length), &reject).is_ok());
  EXPECT_EQ(reject.code, LH_ERR_PROTOCOL);
  EXPECT_NE(reject.reason.find("version"), std::string::npos) << reject.reason;
  expect_refusals(1);
  expect_still_accepting(with_secret(""));
}

TEST_F(Refusals, RandomBytesHostileLengthsAndScannersNeverHurtTheListener) {
  start_listener(with_secret("s"));
  std::mt19937 rng(1);
  int attempts = 0;
  for (int i = 0; i < 20; ++i, ++attempts) {  // random garbage
    std::vector<std::byte> junk(1 + rng() % 300);
    for (auto& b : junk) b = static_cast<std::byte>(rng());
    raw_exchange(junk);
  }
  // A valid-looking header claiming a 4 GiB handshake payload: refused before any allocation.
  auto huge = encode_header({FrameType::kHello, 0, 0xffffffffu, 0, 0, 0});
  raw_exchange(huge);
  ++attempts;
  // A port scanner: connect and hang up at once.
  for (int i = 0; i < 5; ++i, ++attempts) {
    asio::io_context ctx;
    asio::ip::tcp::socket s(ctx);
    s.connect({asio::ip::make_address("127.0.0.1"), listener_->port()});
  }
  // A silent client: dropped after the handshake timeout.
  {
    asio::io_context ctx;
    asio::ip::tcp::socket s(ctx);
    s.connect({asio::ip::make_address("127.0.0.1"), listener_->port()});
    std::array<std::byte, 64> buf;
    asio::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    s.read_some(asio::buffer(buf), ec);  // returns when the listener gives up on us
    EXPECT_TRUE(ec);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    ++attempts;
  }
  expect_refusals(static_cast<uint64_t>(attempts));
  expect_still_accepting(with_secret("s"));
}

TEST_F(Refusals, TlsAndPlaintextDoNotMix) {
  start_listener(testing::tls_options(with_secret("s")));
  auto plain = connect_link(io_, "127.0.0.1", listener_->port(), 1, with_secret("s"));
  EXPECT_FALSE(plain.is_ok());
  expect_still_accepting(testing::tls_options(with_secret("s")));
  listener_->close();
  start_listener(with_secret("s"));
  auto tls =
      connect_link(io_, "127.0.0.1", listener_->port(), 1, testing::tls_options(with_secret("s")));
  EXPECT_FALSE(tls.is_ok());
  EXPECT_EQ(tls.status().code(), LH_ERR_AUTH) << tls.status().to_string();
}

TEST_F(Refusals, TlsVerifiesTheServerAgainstACaWhenGiven) {
  start_listener(testing::tls_options(with_secret("s")));
  TransportOptions client = with_secret("s");
  client.tls.enabled = true;
  client.tls.ca_file = testing::test_certificate().cert;  // self-signed: it is its own CA
  auto ok = connect_link(io_, "127.0.0.1", listener_->port(), 2, client);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  ok.value()->close();
  // A CA that did not sign the server's certificate.
  char dir_template[] = "/tmp/longhaul-ca-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
      "-subj /CN=other -keyout " +
      dir + "/k.pem -out " + dir + "/c.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  client.tls.ca_file = dir + "/c.pem";
  auto bad = connect_link(io_, "127.0.0.1", listener_->port(), 1, client);
  EXPECT_EQ(bad.status().code(), LH_ERR_AUTH) << bad.status().to_string();
}

TEST_F(Refusals, ConnectingToNothingFailsFast) {
  start_listener(with_secret(""));
  const uint16_t port = listener_->port();
  listener_->close();
  listener_ = nullptr;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = std::chrono::steady_clock::now();
  auto link = connect_link(io_, "127.0.0.1", port, 4, with_secret(""));
  EXPECT_EQ(link.status().code(), LH_ERR_PEER_LOST) << link.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

// Issue 50, item 5: an address at its cap of unauthenticated connections is told why and when to
// come back (a REJECT with kRetryLaterCode, not an end of file), and once its silent connection
// has sat in its handshake past the grace, a newcomer from that address takes its place.
TEST_F(Refusals, AnAddressAtItsHandshakeCapIsToldToRetryThenAdmittedPastTheGrace) {
  TransportOptions options = with_secret("s");
  options.max_unauthenticated_per_address = 1;
  options.unauthenticated_grace = std::chrono::milliseconds(400);
  start_listener(options);
  asio::io_context ctx;
  asio::ip::tcp::socket silent(ctx);
  silent.connect({asio::ip::make_address("127.0.0.1"), listener_->port()});
  for (int i = 0; i < 200 && listener_->handshaking_count() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(listener_->handshaking_count(), 1u);

  auto refused = connect_link(io_, "127.0.0.1", listener_->port(), 1, with_secret("s"));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_TRUE(is_retry_later(refused.status())) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("retry"), std::string::npos)
      << refused.status().to_string();

  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  auto admitted = connect_link(io_, "127.0.0.1", listener_->port(), 1, with_secret("s"));
  ASSERT_TRUE(admitted.is_ok()) << admitted.status().to_string();  // the silent one gave way
  admitted.value()->close();
  std::array<std::byte, 16> buf;
  asio::error_code ec;
  silent.read_some(asio::buffer(buf), ec);
  EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
}

TEST_F(Refusals, InvalidConnectionCountIsACallerError) {
  start_listener(with_secret(""));
  EXPECT_EQ(connect_link(io_, "127.0.0.1", listener_->port(), 0, {}).status().code(),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(connect_link(io_, "127.0.0.1", listener_->port(), 65, {}).status().code(),
            LH_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace longhaul::net
