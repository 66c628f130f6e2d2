// The transport::DataLink contract, checked on every implementation the collectives run over: the
// network's net::Link (K TCP connections, plaintext and TLS) and the in-process link the
// collective tests use. A schedule written against the interface behaves the same on each.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "transport/inproc_link.hpp"

namespace longhaul {
namespace {

using net::testing::Done;

// Two joined ends and a way to break the first one as a crash would.
struct Ends {
  std::shared_ptr<transport::DataLink> a, b;
  std::function<void()> break_a;
  std::shared_ptr<void> keep;  // whatever must outlive the ends
};

struct Implementation {
  std::string name;
  std::function<Ends(runtime::IoRuntime&)> make;
};

Ends tcp_ends(runtime::IoRuntime& io, bool tls) {
  net::TransportOptions options = tls ? net::testing::tls_options() : net::TransportOptions{};
  options.secret = "cluster-secret";
  std::shared_ptr<net::testing::LinkPair> pair =
      net::testing::connect_pair(io, 3, options, options);
  Ends e;
  e.a = pair->client;
  e.b = pair->server;
  e.break_a = [link = pair->client] { link->close(peer_lost("the test breaks the link")); };
  e.keep = pair;
  return e;
}

Ends in_process_ends(runtime::IoRuntime& io) {
  auto [a, b] = transport::InProcessLink::pair(io.context().get_executor(), "a", "b");
  Ends e;
  e.a = a;
  e.b = b;
  e.break_a = [a] { a->fail(peer_lost("the test breaks the link")); };
  return e;
}

class DataLinkContract : public ::testing::TestWithParam<Implementation> {
 protected:
  void SetUp() override { ends_ = GetParam().make(io_); }
  runtime::IoRuntime io_{2};
  Ends ends_;
};

std::vector<std::byte> bytes_of(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xFF);
  return v;
}

TEST_P(DataLinkContract, AReceivePostedBeforeOrAfterItsSendGetsTheBytesInPlace) {
  const auto early = bytes_of(100000, 1), late = bytes_of(3, 2);
  std::vector<std::byte> early_dst(early.size()), late_dst(late.size());
  Done r1, s1, r2, s2;
  ends_.b->recv(1, early_dst, r1.callback());  // posted first
  ends_.a->send(1, early, s1.callback());
  ends_.a->send(2, late, s2.callback());  // sent first
  ASSERT_TRUE(s2.wait().is_ok());
  ends_.b->recv(2, late_dst, r2.callback());
  for (Done* d : {&r1, &s1, &r2}) EXPECT_TRUE(d->wait().is_ok());
  EXPECT_EQ(early_dst, early);
  EXPECT_EQ(late_dst, late);
}

TEST_P(DataLinkContract, ManyTaggedTransfersInBothDirectionsEachGetTheirOwnBytes) {
  constexpr int kTransfers = 64;
  std::vector<std::vector<std::byte>> src, dst;
  for (int i = 0; i < kTransfers; ++i) {
    src.push_back(bytes_of(1000 + 977 * i, i));
    dst.emplace_back(src.back().size());
  }
  std::vector<Done> done(2 * kTransfers);
  for (int i = 0; i < kTransfers; ++i) {
    const auto& from = i % 2 ? ends_.a : ends_.b;
    const auto& to = i % 2 ? ends_.b : ends_.a;
    to->recv(1000 + i, dst[i], done[2 * i].callback());
    from->send(1000 + i, src[i], done[2 * i + 1].callback());
  }
  for (auto& d : done) EXPECT_TRUE(d.wait().is_ok());
  EXPECT_EQ(dst, src);
}

TEST_P(DataLinkContract, ASizeMismatchFailsTheReceiveAsAProtocolError) {
  const auto src = bytes_of(10, 3);
  std::vector<std::byte> dst(11);
  Done sent, received;
  ends_.b->recv(5, dst, received.callback());
  ends_.a->send(5, src, sent.callback());
  EXPECT_EQ(received.wait().code(), LH_ERR_PROTOCOL);
}

TEST_P(DataLinkContract, ACancelEndsMatchingTransfersAtBothEndsNowAndLater) {
  const transport::Tag op = transport::Tag{0xAB} << 32, mask = ~((transport::Tag{1} << 32) - 1);
  std::vector<std::byte> b_dst(64), a_dst(64);
  Done b_pending, a_pending, other;
  ends_.b->recv(op | 1, b_dst, b_pending.callback());
  ends_.a->recv(op | 2, a_dst, a_pending.callback());
  ends_.a->recv(7, a_dst, other.callback());  // another operation's: untouched
  ends_.a->cancel_matching(op, mask, aborted_error("the test cancels the operation"));
  EXPECT_EQ(a_pending.wait().code(), LH_ERR_ABORTED);
  EXPECT_EQ(b_pending.wait().code(), LH_ERR_ABORTED);
  Done later_b, later_a;
  const auto src = bytes_of(64, 4);
  ends_.b->send(op | 3, src, later_b.callback());
  EXPECT_FALSE(later_b.wait().is_ok()) << "a later post of the cancelled operation went through";
  ends_.a->recv(op | 4, a_dst, later_a.callback());
  EXPECT_FALSE(later_a.wait().is_ok());
  Done sent;
  ends_.b->send(7, src, sent.callback());
  EXPECT_TRUE(other.wait().is_ok()) << "a cancel reached another operation's transfer";
  EXPECT_TRUE(ends_.a->failure().is_ok());
}

TEST_P(DataLinkContract, ABrokenLinkFailsEveryTransferAtBothEndsAndEveryLaterPost) {
  std::vector<std::byte> dst(1 << 20);
  Done pending;
  ends_.b->recv(9, dst, pending.callback());
  ends_.break_a();
  EXPECT_FALSE(pending.wait().is_ok());
  EXPECT_FALSE(ends_.b->failure().is_ok());
  EXPECT_FALSE(ends_.a->failure().is_ok());
  Done later;
  ends_.a->send(10, dst, later.callback());
  EXPECT_FALSE(later.wait().is_ok());
}

INSTANTIATE_TEST_SUITE_P(
    Implementations, DataLinkContract,
    ::testing::Values(
        Implementation{"InProcess", in_process_ends},
        Implementation{"Tcp", [](runtime::IoRuntime& io) { return tcp_ends(io, false); }},
        Implementation{"Tls", [](runtime::IoRuntime& io) { return tcp_ends(io, true); }}),
    [](const ::testing::TestParamInfo<Implementation>& p) { return p.param.name; });

}  // namespace
}  // namespace longhaul
