#include "net/link.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <random>
#include <thread>

#include "test_support.hpp"

namespace longhaul::net {
namespace {

using runtime::IoRuntime;

using testing::connect_pair;
using testing::Done;

std::vector<std::byte> pattern(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::byte>(rng());
  return v;
}

struct StripeCase {
  size_t bytes;
  uint16_t connections;
  bool tls;
};

class Striping : public ::testing::TestWithParam<StripeCase> {};

TEST_P(Striping, DeliversEveryByteInPlace) {
  const auto [bytes, k, tls] = GetParam();
  IoRuntime io(2);
  TransportOptions options = tls ? testing::tls_options() : TransportOptions{};
  options.secret = "cluster-secret";
  auto pair = connect_pair(io, k, options, options);
  ASSERT_TRUE(pair);
  const auto src = pattern(bytes, bytes * 31 + k);
  std::vector<std::byte> dst(bytes, std::byte{0xEE});
  Done sent, received;
  pair->server->recv(7, dst, received.callback());
  pair->client->send(7, src, sent.callback());
  ASSERT_TRUE(sent.wait().is_ok());
  Status r = received.wait();
  ASSERT_TRUE(r.is_ok()) << r.to_string();
  EXPECT_TRUE(dst == src);
}

std::vector<StripeCase> stripe_cases() {
  std::vector<StripeCase> cases;
  for (bool tls : {false, true})
    for (uint16_t k : {uint16_t{1}, uint16_t{3}, uint16_t{8}})
      for (size_t bytes :
           {size_t{0}, size_t{1}, size_t{1000003}, size_t{64} << 20, size_t{256} << 20})
        cases.push_back({bytes, k, tls});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(SizesConnectionsTls, Striping, ::testing::ValuesIn(stripe_cases()),
                         [](const ::testing::TestParamInfo<StripeCase>& param_info) {
                           const StripeCase& c = param_info.param;
                           return std::to_string(c.bytes) + "B_K" + std::to_string(c.connections) +
                                  (c.tls ? "_tls" : "_plain");
                         });

// The upload cap (link_rate_bytes_per_s) is the link's, not each connection's: K = 4 connections
// capped at 80 Mbit/s together take ~0.4 s for 4 MB, in both directions of the link.
TEST(Link, AnUploadCapHoldsTheWholeLinkNotEachConnection) {
  IoRuntime io(2);
  TransportOptions options;
  options.link_rate_bytes_per_s = 10'000'000;  // 80 Mbit/s
  auto pair = connect_pair(io, 4, options, options);
  ASSERT_TRUE(pair);
  const auto src = pattern(4'000'000, 5);
  for (bool client_sends : {true, false}) {
    std::vector<std::byte> dst(src.size());
    Done sent, received;
    const auto t0 = std::chrono::steady_clock::now();
    (client_sends ? pair->server : pair->client)->recv(9 + client_sends, dst, received.callback());
    (client_sends ? pair->client : pair->server)->send(9 + client_sends, src, sent.callback());
    ASSERT_TRUE(received.wait().is_ok());
    ASSERT_TRUE(sent.wait().is_ok());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The kernel paces after an initial window; 4 MB at 10 MB/s is 0.4 s, an uncapped loopback
    // link takes milliseconds.
    EXPECT_GE(seconds, 0.3) << (client_sends ? "client" : "server") << " side not capped";
    EXPECT_LE(seconds, 5.0);  // loose: a loaded machine paces late
    EXPECT_TRUE(dst == src);
  }
}

TEST(Link, ManyOpsInFlightBothDirectionsAndEarlyArrivals) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 4, {}, {});
  ASSERT_TRUE(pair);
  constexpr int kOps = 32;
  std::vector<std::vector<std::byte>> src(kOps), back(kOps), dst(kOps), back_dst(kOps);
  std::vector<std::unique_ptr<Done>> done;
  for (int i = 0; i < kOps; ++i) {
    const size_t n = static_cast<size_t>(1 + i * 97'003);
    src[i] = pattern(n, i);
    back[i] = pattern(n / 3, 1000 + i);
    dst[i].resize(n);
    back_dst[i].resize(n / 3);
  }
  // Half the receives are posted after the data is sent, exercising the early-arrival path.
  for (int i = 0; i < kOps; i += 2) {
    done.push_back(std::make_unique<Done>());
    pair->server->recv(i, dst[i], done.back()->callback());
  }
  for (int i = 0; i < kOps; ++i) {
    done.push_back(std::make_unique<Done>());
    pair->client->send(i, src[i], done.back()->callback());
    done.push_back(std::make_unique<Done>());
    pair->server->send(1000 + i, back[i], done.back()->callback());
    done.push_back(std::make_unique<Done>());
    pair->client->recv(1000 + i, back_dst[i], done.back()->callback());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 1; i < kOps; i += 2) {
    done.push_back(std::make_unique<Done>());
    pair->server->recv(i, dst[i], done.back()->callback());
  }
  for (auto& d : done) ASSERT_TRUE(d->wait().is_ok());
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE(dst[i] == src[i]) << i;
    EXPECT_TRUE(back_dst[i] == back[i]) << i;
  }
}

TEST(Link, EarlyDataBeyondTheBudgetWaitsInsteadOfBeingLost) {
  IoRuntime io(2);
  TransportOptions small;
  small.max_unexpected_bytes = 1 << 20;
  small.segment_bytes = 256 << 10;
  auto pair = connect_pair(io, 2, small, small);
  ASSERT_TRUE(pair);
  const auto src = pattern(16 << 20, 5);
  std::vector<std::byte> dst(src.size());
  Done sent, received;
  pair->client->send(1, src, sent.callback());
  // The sender cannot finish while the receiver holds at most 1 MiB of early data.
  EXPECT_EQ(sent.wait(std::chrono::milliseconds(300)).code(), LH_ERR_TIMEOUT);
  pair->server->recv(1, dst, received.callback());
  ASSERT_TRUE(received.wait().is_ok());
  EXPECT_TRUE(dst == src);
}

TEST(Link, ControlMessagesArriveInOrder) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 3, {}, {});
  ASSERT_TRUE(pair);
  std::mutex mu;
  std::vector<uint32_t> got;
  std::promise<void> all;
  constexpr uint32_t kCount = 500;
  pair->server->close();
  pair = nullptr;
  // A fresh pair whose server has a control handler from the start.
  auto listener = *Listener::create(io, "127.0.0.1", 0, {});
  listener->start([&](std::shared_ptr<Link> link, Role) {
    link->start([&](std::vector<std::byte> m) {
      std::lock_guard lock(mu);
      uint32_t v;
      std::memcpy(&v, m.data(), 4);
      got.push_back(v);
      if (got.size() == kCount) all.set_value();
    });
  });
  auto client = *connect_link(io, "127.0.0.1", listener->port(), 3, {});
  client->start();
  for (uint32_t i = 0; i < kCount; ++i) {
    std::vector<std::byte> m(4 + i % 50);
    std::memcpy(m.data(), &i, 4);
    client->send_control(std::move(m));
  }
  ASSERT_EQ(all.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::vector<uint32_t> want(kCount);
  std::iota(want.begin(), want.end(), 0u);
  EXPECT_EQ(got, want);
  client->close();
  listener->close();
}

// A remote that writes its last control message and closes while this side is writing: this
// side's write fails (the remote reset the connection), and the message still arrives, before
// the link reports its failure. Each round races the two anew.
TEST(Link, TheRemotesLastMessageArrivesBeforeTheFailureOfAWriteThatRacedItsClose) {
  IoRuntime io(2);
  auto listener = *Listener::create(io, "127.0.0.1", 0, {});
  listener->start([](std::shared_ptr<Link> link, Role) {
    link->start();
    link->send_control({std::byte{42}}, [link](Status) { link->close(closed_error("goodbye")); });
  });
  constexpr int kRounds = 200;
  int last_message_lost = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto client = *connect_link(io, "127.0.0.1", listener->port(), 1, {});
    auto heard = std::make_shared<std::atomic<bool>>(false);
    auto heard_before_failure = std::make_shared<std::promise<bool>>();
    auto outcome = heard_before_failure->get_future();
    client->start([heard](std::vector<std::byte>) { heard->store(true); },
                  [heard, heard_before_failure](const Status&) {
                    heard_before_failure->set_value(heard->load());
                  });
    // Writes until the remote's reset fails one.
    for (int i = 0; i < 100000 && client->failure().is_ok(); ++i)
      client->send_control(std::vector<std::byte>(256));
    ASSERT_EQ(outcome.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    if (!outcome.get()) ++last_message_lost;
    client->close();
  }
  EXPECT_EQ(last_message_lost, 0) << "of " << kRounds << " rounds";
  listener->close();
}

TEST(Link, CancelEndsTheOpOnBothSidesAndLateBytesAreDiscarded) {
  IoRuntime io(2);
  TransportOptions slow;
  slow.max_unexpected_bytes = 1 << 20;
  auto pair = connect_pair(io, 2, slow, slow);
  ASSERT_TRUE(pair);
  const auto big = pattern(64 << 20, 1);
  std::vector<std::byte> dst(big.size());
  Done sent, received;
  pair->server->recv(5, dst, received.callback());
  pair->client->send(5, big, sent.callback());
  pair->server->cancel(5, aborted_error("master said so"));
  Status r = received.wait(std::chrono::seconds(1));
  EXPECT_EQ(r.code(), LH_ERR_ABORTED) << r.to_string();
  Status s = sent.wait(std::chrono::seconds(5));
  EXPECT_TRUE(s.is_ok() || s.code() == LH_ERR_ABORTED) << s.to_string();
  // A receive for the cancelled op fails at once; the link still carries the next op intact.
  Done again;
  pair->server->recv(5, dst, again.callback());
  EXPECT_EQ(again.wait(std::chrono::seconds(1)).code(), LH_ERR_ABORTED);
  const auto next = pattern(3 << 20, 2);
  std::vector<std::byte> next_dst(next.size());
  Done sent2, received2;
  pair->server->recv(6, next_dst, received2.callback());
  pair->client->send(6, next, sent2.callback());
  ASSERT_TRUE(received2.wait().is_ok());
  EXPECT_TRUE(next_dst == next);
}

TEST(Link, CancelMatchingEndsPresentAndFutureOpsOfAPrefixAtBothEnds) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 2, {}, {});
  ASSERT_TRUE(pair);
  constexpr uint64_t kMask = ~uint64_t{0xFFFF};
  std::vector<std::byte> a(1000), b(1000), c(1000);
  Done waiting_remote, unrelated;
  pair->server->recv(0x10002, a, waiting_remote.callback());  // same prefix as 0x10000
  pair->server->recv(0x20001, b, unrelated.callback());
  pair->client->cancel_matching(0x10000, kMask, aborted_error("operation failed"));
  EXPECT_EQ(waiting_remote.wait(std::chrono::seconds(1)).code(), LH_ERR_ABORTED);
  // Ops of the prefix posted later fail at once on both sides; other ops still work.
  Done later_local, later_remote;
  pair->client->send(0x10007, c, later_local.callback());
  EXPECT_EQ(later_local.wait(std::chrono::seconds(1)).code(), LH_ERR_ABORTED);
  pair->server->recv(0x10009, c, later_remote.callback());
  EXPECT_EQ(later_remote.wait(std::chrono::seconds(1)).code(), LH_ERR_ABORTED);
  Done sent;
  pair->client->send(0x20001, a, sent.callback());
  EXPECT_TRUE(unrelated.wait().is_ok());
}

// A mismatch's reason crosses the link with the cancel (frame.hpp, kMaxCancelReason): the remote
// end's transfers of the prefix, present and future, fail with its words, not a bare "cancelled".
TEST(Link, ACancelForAMismatchCarriesItsReasonToBothEndsAndToLaterOps) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 2, {}, {});
  ASSERT_TRUE(pair);
  constexpr uint64_t kMask = ~uint64_t{0xFFFF};
  std::vector<std::byte> a(1000), b(1000);
  Done waiting_remote;
  pair->server->recv(0x30002, a, waiting_remote.callback());
  const std::string why(2000, 'x');  // longer than a CANCEL carries: cut, not refused
  pair->client->cancel_matching(0x30000, kMask, mismatch_error("the dtype: f32 at 1, f64 at 2"));
  Status remote = waiting_remote.wait(std::chrono::seconds(5));
  EXPECT_EQ(remote.code(), LH_ERR_MISMATCH) << remote.to_string();
  EXPECT_NE(remote.message().find("the dtype: f32 at 1, f64 at 2"), std::string::npos)
      << remote.to_string();
  Done later_remote, later_local;
  pair->server->send(0x30009, b, later_remote.callback());
  EXPECT_EQ(later_remote.wait(std::chrono::seconds(1)).code(), LH_ERR_MISMATCH);
  pair->client->recv(0x30007, b, later_local.callback());
  EXPECT_EQ(later_local.wait(std::chrono::seconds(1)).code(), LH_ERR_MISMATCH);
  // A long reason is cut to what a frame carries; the link goes on working.
  Done long_remote;
  pair->server->recv(0x40001, a, long_remote.callback());
  pair->client->cancel_matching(0x40000, kMask, mismatch_error(why));
  Status cut = long_remote.wait(std::chrono::seconds(5));
  EXPECT_EQ(cut.code(), LH_ERR_MISMATCH);
  EXPECT_EQ(cut.message().size(), kMaxCancelReason);
  Done sent, received;
  pair->server->recv(0x50001, a, received.callback());
  pair->client->send(0x50001, b, sent.callback());
  EXPECT_TRUE(received.wait().is_ok());
  EXPECT_TRUE(pair->client->failure().is_ok());
}

TEST(Link, BytesSentBeforeTheRemoteClosesAllArriveOnEveryConnection) {
  for (bool tls : {false, true}) {
    IoRuntime io(2);
    TransportOptions options = tls ? testing::tls_options() : TransportOptions{};
    auto pair = connect_pair(io, 8, options, options);
    ASSERT_TRUE(pair);
    const auto src = pattern(48 << 20, 11);
    std::vector<std::byte> dst(src.size());
    Done received;
    pair->client->recv(1, dst, received.callback());
    // The sender closes the moment its last write is in the kernel, as a peer that leaves right
    // after finishing its part does; segments still queued on other connections must not be lost.
    auto server = pair->server;
    server->send(1, src, [server](Status) { server->close(closed_error("done, leaving")); });
    Status s = received.wait();
    ASSERT_TRUE(s.is_ok()) << (tls ? "tls: " : "plain: ") << s.to_string();
    EXPECT_TRUE(dst == src);
    // And once every connection has ended, the link reports the loss.
    for (int i = 0; i < 100 && pair->client->failure().is_ok(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(pair->client->failure().code(), LH_ERR_PEER_LOST);
  }
}

TEST(Link, SizeMismatchFailsTheOpNotTheLink) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 2, {}, {});
  ASSERT_TRUE(pair);
  const auto src = pattern(1000, 1);
  std::vector<std::byte> dst(999);
  Done sent, received;
  pair->server->recv(9, dst, received.callback());
  pair->client->send(9, src, sent.callback());
  EXPECT_EQ(received.wait().code(), LH_ERR_PROTOCOL);
  std::vector<std::byte> ok_dst(src.size());
  Done sent2, received2;
  pair->server->recv(10, ok_dst, received2.callback());
  pair->client->send(10, src, sent2.callback());
  ASSERT_TRUE(received2.wait().is_ok());
  EXPECT_TRUE(ok_dst == src);
}

TEST(Link, DuplicateOpIdIsAnError) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 1, {}, {});
  ASSERT_TRUE(pair);
  std::vector<std::byte> a(10), b(10);
  Done first, second;
  pair->server->recv(1, a, first.callback());
  pair->server->recv(1, b, second.callback());
  EXPECT_EQ(second.wait().code(), LH_ERR_INVALID_ARGUMENT);
  pair->client->send(1, a, {});
  EXPECT_TRUE(first.wait().is_ok());
}

TEST(Link, LocalCloseFailsPendingOpsAtBothEnds) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 4, {}, {});
  ASSERT_TRUE(pair);
  std::vector<std::byte> a(1 << 20), b(1 << 20);
  Done client_recv, server_recv;
  pair->client->recv(1, a, client_recv.callback());
  pair->server->recv(2, b, server_recv.callback());
  const auto t0 = std::chrono::steady_clock::now();
  pair->client->close();
  EXPECT_EQ(client_recv.wait(std::chrono::seconds(1)).code(), LH_ERR_CLOSED);
  Status remote = server_recv.wait(std::chrono::seconds(1));
  EXPECT_EQ(remote.code(), LH_ERR_PEER_LOST) << remote.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  Done after;
  pair->server->send(3, a, after.callback());
  EXPECT_EQ(after.wait().code(), LH_ERR_PEER_LOST);
}

TEST(Link, WorksOverIpv6Loopback) {
  IoRuntime io(2);
  auto probe = Listener::create(io, "::1", 0, {});
  if (!probe) GTEST_SKIP() << "no IPv6 loopback here: " << probe.status().to_string();
  probe.value()->close();
  auto pair = connect_pair(io, 2, {}, {}, "::1");
  ASSERT_TRUE(pair);
  const auto src = pattern(5 << 20, 3);
  std::vector<std::byte> dst(src.size());
  Done sent, received;
  pair->server->recv(1, dst, received.callback());
  pair->client->send(1, src, sent.callback());
  ASSERT_TRUE(received.wait().is_ok());
  EXPECT_TRUE(dst == src);
}

// Polls until `value()` reaches `expected` or 10 s pass; returns the last value. Frames that
// complete nothing (a control message nobody handles, a CANCEL) are counted on the reader's time.
template <class Read>
uint64_t await_count(Read value, uint64_t expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t v = value();
  while (v < expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    v = value();
  }
  return v;
}

class LinkTraffic : public ::testing::TestWithParam<bool> {};

TEST_P(LinkTraffic, CountsEveryFrameHeaderAndPayloadOnEveryConnectionBothWays) {
  IoRuntime io(2);
  const TransportOptions options = GetParam() ? testing::tls_options() : TransportOptions{};
  auto pair = connect_pair(io, 3, options, options);
  ASSERT_TRUE(pair);
  auto client = std::make_shared<TrafficCounter>();
  auto server = std::make_shared<TrafficCounter>();
  pair->client->count_traffic(client);
  pair->server->count_traffic(server);

  // Up: 3 MiB + 5 bytes in four 1 MiB segments over the three connections, and an empty op (one
  // DATA frame with no payload). Down: 1000 bytes in one segment and a 100-byte control message.
  const auto big = pattern((3 << 20) + 5, 1);
  const auto small = pattern(1000, 2);
  std::vector<std::byte> big_dst(big.size()), small_dst(small.size());
  Done big_sent, big_received, empty_sent, empty_received, small_sent, small_received, control_sent;
  pair->server->recv(1, big_dst, big_received.callback());
  pair->server->recv(2, {}, empty_received.callback());
  pair->client->recv(3, small_dst, small_received.callback());
  pair->client->send(1, big, big_sent.callback());
  pair->client->send(2, {}, empty_sent.callback());
  pair->server->send(3, small, small_sent.callback());
  pair->server->send_control(std::vector<std::byte>(100, std::byte{7}), control_sent.callback());
  for (Done* d : {&big_sent, &big_received, &empty_sent, &empty_received, &small_sent,
                  &small_received, &control_sent})
    ASSERT_TRUE(d->wait().is_ok());

  const uint64_t up = 4 * kFrameHeaderBytes + big.size() + kFrameHeaderBytes;
  const uint64_t down = kFrameHeaderBytes + small.size() + kFrameHeaderBytes + 100;
  // A completion runs after its frames were counted.
  EXPECT_EQ(client->sent(), up);
  EXPECT_EQ(server->received(), up);
  EXPECT_EQ(server->sent(), down);
  EXPECT_EQ(await_count([&] { return client->received(); }, down), down);

  // A CANCEL is a header alone, in both counts.
  pair->client->cancel(9, aborted_error("counting a cancel"));
  EXPECT_EQ(await_count([&] { return client->sent(); }, up + kFrameHeaderBytes),
            up + kFrameHeaderBytes);
  EXPECT_EQ(await_count([&] { return server->received(); }, up + kFrameHeaderBytes),
            up + kFrameHeaderBytes);
  EXPECT_EQ(server->sent(), down);
  EXPECT_EQ(client->received(), down);
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, LinkTraffic, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? "tls" : "plain";
                         });

// An inbound link carries its first messages before the layer above knows which counter it
// belongs to: they are counted once it is given one. A second counter changes nothing.
TEST(LinkTraffic, FramesBeforeTheCounterAreCountedAndOnlyTheFirstCounterCounts) {
  IoRuntime io(2);
  auto pair = connect_pair(io, 1, {}, {});
  ASSERT_TRUE(pair);
  const auto src = pattern(4096, 3);
  std::vector<std::byte> dst(src.size());
  Done sent, received;
  pair->server->recv(1, dst, received.callback());
  pair->client->send(1, src, sent.callback());
  ASSERT_TRUE(sent.wait().is_ok());
  ASSERT_TRUE(received.wait().is_ok());

  auto first = std::make_shared<TrafficCounter>();
  auto second = std::make_shared<TrafficCounter>();
  pair->server->count_traffic(first);
  pair->server->count_traffic(second);
  const uint64_t frame = kFrameHeaderBytes + src.size();
  EXPECT_EQ(first->received(), frame);
  EXPECT_EQ(first->sent(), 0u);

  Done again_sent, again_received;
  pair->client->recv(2, dst, again_received.callback());
  pair->server->send(2, src, again_sent.callback());
  ASSERT_TRUE(again_sent.wait().is_ok());
  ASSERT_TRUE(again_received.wait().is_ok());
  EXPECT_EQ(first->sent(), frame);
  EXPECT_EQ(second->sent(), 0u);
  EXPECT_EQ(second->received(), 0u);
}

TEST(Endpoint, ParsesHostPort) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(parse_host_port("127.0.0.1:8080", &host, &port).is_ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 8080);
  ASSERT_TRUE(parse_host_port("[::1]:0", &host, &port).is_ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
  EXPECT_EQ(parse_host_port("::1:80", &host, &port).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_host_port("host:99999", &host, &port).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_host_port("host", &host, &port).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_host_port(":80", &host, &port).code(), LH_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace longhaul::net
