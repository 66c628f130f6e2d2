// The peer side in-process against a real MasterServer on loopback: ring views, the data links
// handed to the collective layer, and the errors of connect.
#include "peer/session.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "master/master.hpp"
#include "peer/communicator.hpp"

namespace longhaul::peer {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<master::Master> start_master() {
  master::MasterOptions options;
  options.listen_host = "127.0.0.1";
  auto m = master::Master::create(options);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m) return nullptr;
  (*m)->run();
  return std::move(*m);
}

CommunicatorOptions options_for(const master::Master& m) {
  CommunicatorOptions o;
  o.master_address = "127.0.0.1:" + std::to_string(m.port());
  o.listen_address = "127.0.0.1:0";
  return o;
}

// A communicator and the runtime it runs on, destroyed in that order (as lh_comm does).
struct Member {
  runtime::Runtime runtime;
  std::unique_ptr<Communicator> comm;
  PeerSession& session() { return comm->session(); }
};

std::unique_ptr<Member> make(const CommunicatorOptions& o) {
  auto m = std::make_unique<Member>();
  auto c = Communicator::create(o, m->runtime);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  if (!c) return nullptr;
  m->comm = std::move(*c);
  return m;
}

TEST(Topology, NeighboursAndRank) {
  wire::TopologyMsg m{4,
                      {{1, 0, "a", 1}, {2, 0, "b", 2}, {3, 0, "c", 3}, {4, 1, "d", 4}},
                      {{0, {3, 1, 2}}, {1, {4}}}};
  auto t = Topology::from_message(m, 1, 0);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->rank(), 1u);
  EXPECT_EQ(t->neighbours(), (std::vector<PeerId>{3, 2}));
  EXPECT_EQ(t->world_size(), 4u);
  EXPECT_EQ(t->group_world_size(), 3u);
  EXPECT_EQ(t->group_count(), 2u);
  auto alone = Topology::from_message(m, 4, 1);
  ASSERT_TRUE(alone.is_ok());
  EXPECT_TRUE(alone->neighbours().empty());
  EXPECT_FALSE(Topology::from_message(m, 4, 0).is_ok()) << "peer 4 is not in group 0's ring";
  EXPECT_FALSE(Topology::from_message(m, 9, 0).is_ok());
}

TEST(PeerSession, RingLinksCarryDataBetweenNeighbours) {
  auto m = start_master();
  ASSERT_TRUE(m);
  auto a = make(options_for(*m));
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->session().connect().is_ok());
  auto o = options_for(*m);
  o.connections_per_link = 3;
  auto b = make(o);
  ASSERT_TRUE(b);
  // b's connect blocks until a reaches update_topology.
  auto joined = std::async(std::launch::async, [&] { return b->session().connect(); });
  for (int i = 0; i < 500 && !a->session().peers_pending(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(a->session().peers_pending());
  ASSERT_TRUE(a->session().update_topology().is_ok());
  ASSERT_TRUE(joined.get().is_ok());

  const RingLinks ra = a->session().ring_links();
  RingLinks rb = b->session().ring_links();
  EXPECT_EQ(ra.epoch, rb.epoch);
  EXPECT_EQ(ra.ring, rb.ring);
  EXPECT_EQ(ra.ring.size(), 2u);
  ASSERT_TRUE(ra.right_link && rb.left_link);
  EXPECT_EQ(ra.left_link, ra.right_link) << "a ring of two shares one link";
  EXPECT_EQ(ra.right_link->connection_count(), 1u) << "a (smaller id) connected with its own K";
  const std::vector<std::byte> src(3 << 20, std::byte{0x5C});
  std::vector<std::byte> dst(src.size());
  std::promise<Status> sent, received;
  rb.left_link->recv(77, dst, [&](Status s) { received.set_value(s); });
  ra.right_link->send(77, src, [&](Status s) { sent.set_value(s); });
  EXPECT_TRUE(sent.get_future().get().is_ok());
  EXPECT_TRUE(received.get_future().get().is_ok());
  EXPECT_EQ(dst, src);

  const TopologyView va = a->session().view(), vb = b->session().view();
  EXPECT_EQ(va.world_size, 2u);
  EXPECT_NE(va.rank, vb.rank);
  EXPECT_FALSE(a->session().peers_pending());

  // b dies (its communicator is destroyed without a leave): a is told to abort, and its next
  // update_topology re-forms a ring of one.
  std::promise<Status> aborted;
  a->session().set_abort_handler(
      [&, once = std::make_shared<std::once_flag>()](uint64_t, const Status& why) {
        std::call_once(*once, [&] { aborted.set_value(why); });
      });
  rb = {};  // b's links must not outlive b's I/O runtime, which b.reset() destroys
  b.reset();
  auto abort_future = aborted.get_future();
  ASSERT_EQ(abort_future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(abort_future.get().code(), LH_ERR_PEER_LOST);
  for (int i = 0; i < 500 && !a->session().peers_pending(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(a->session().update_topology().is_ok());
  EXPECT_EQ(a->session().view().world_size, 1u);
  EXPECT_FALSE(a->session().ring_links().right_link);
}

TEST(PeerSession, ConnectFailsClearly) {
  CommunicatorOptions bad;
  bad.master_address = "nonsense";
  runtime::Runtime runtime;
  auto c = Communicator::create(bad, runtime);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), LH_ERR_INVALID_ARGUMENT);

  // Nobody listens there: refused at once.
  auto m = start_master();
  ASSERT_TRUE(m);
  auto o = options_for(*m);
  const uint16_t port = m->port();
  m.reset();
  o.master_address = "127.0.0.1:" + std::to_string(port);
  auto lone = make(o);
  ASSERT_TRUE(lone);
  const Status s = lone->session().connect();
  EXPECT_EQ(s.code(), LH_ERR_PEER_LOST) << s.to_string();
  EXPECT_EQ(lone->session().update_topology().code(), LH_ERR_PEER_LOST) << "the failure sticks";
}

TEST(PeerSession, ConnectTimesOutWhenNobodyAdmitsIt) {
  auto m = start_master();
  ASSERT_TRUE(m);
  auto first = make(options_for(*m));
  ASSERT_TRUE(first && first->session().connect().is_ok());
  auto o = options_for(*m);
  o.connect_timeout = 300ms;  // `first` never calls update_topology
  auto second = make(o);
  ASSERT_TRUE(second);
  const auto start = std::chrono::steady_clock::now();
  const Status s = second->session().connect();
  EXPECT_EQ(s.code(), LH_ERR_TIMEOUT) << s.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // The master forgets the abandoned joiner, so `first` has nothing to wait for.
  for (int i = 0; i < 500 && first->session().peers_pending(); ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(first->session().peers_pending());
  EXPECT_EQ(m->snapshot().pending_peers, 0u);
}

}  // namespace
}  // namespace longhaul::peer
