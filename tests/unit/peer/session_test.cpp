// The peer side in-process against a real MasterServer on loopback: ring views, the data links
// handed to the collective layer, and the errors of connect. Then against a scripted master and a
// hand-made data link: which messages a session and its mesh accept, and which end them.
#include "peer/session.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
                      {{0, {3, 1, 2}}, {1, {4}}},
                      0,
                      {}};
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

// A master that answers each message from its one peer with the messages `reply` gives.
class ScriptedMaster {
 public:
  using Reply = std::function<std::vector<wire::ControlMessage>(const wire::ControlMessage&)>;

  explicit ScriptedMaster(Reply reply) : reply_(std::move(reply)) {
    net::TransportOptions transport;
    transport.role = net::Role::kMaster;
    auto listener = net::Listener::create(io_, "127.0.0.1", 0, transport);
    EXPECT_TRUE(listener.is_ok()) << listener.status().to_string();
    if (!listener) return;
    listener_ = std::move(*listener);
    listener_->start([this](std::shared_ptr<net::Link> link, net::Role) { serve(link); });
  }
  ~ScriptedMaster() {
    if (listener_) listener_->close();
    std::lock_guard lock(mu_);
    if (link_) link_->close();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(listener_->port()); }
  // Closes the control link, as a master that died would; the listener stays for the reconnect.
  void drop_link() {
    std::lock_guard lock(mu_);
    if (link_) link_->close();
  }

 private:
  void serve(const std::shared_ptr<net::Link>& link) {
    {
      std::lock_guard lock(mu_);
      link_ = link;
    }
    std::weak_ptr<net::Link> weak = link;
    link->start([this, weak](std::vector<std::byte> bytes) {
      auto message = wire::decode_control(bytes);
      auto l = weak.lock();
      if (!message || !l) return;
      for (const auto& answer : reply_(*message)) l->send_control(wire::encode_control(answer));
    });
  }

  Reply reply_;  // outlives io_'s threads, which run it
  runtime::IoRuntime io_{1};
  std::shared_ptr<net::Listener> listener_;
  std::mutex mu_;
  std::shared_ptr<net::Link> link_;
};

constexpr PeerId kScriptedId = 7;

// WELCOME, then `extra`, then a one-peer TOPOLOGY for epoch 1, committed once the links are ready.
ScriptedMaster::Reply admit_after(std::vector<wire::ControlMessage> extra) {
  return [extra](const wire::ControlMessage& m) -> std::vector<wire::ControlMessage> {
    if (auto* reg = std::get_if<wire::RegisterMsg>(&m)) {
      std::vector<wire::ControlMessage> out{wire::WelcomeMsg{kScriptedId, 1000, 3}};
      out.insert(out.end(), extra.begin(), extra.end());
      out.push_back(wire::TopologyMsg{
          1, {{kScriptedId, 0, "127.0.0.1", reg->advertised_port}}, {{0, {kScriptedId}}}, 0, {}});
      return out;
    }
    if (std::holds_alternative<wire::LinksReadyMsg>(m)) return {wire::EpochCommitMsg{1, 0, false}};
    return {};
  };
}

struct ScriptedPeer {
  runtime::IoRuntime io{2};
  std::shared_ptr<PeerSession> session;

  explicit ScriptedPeer(const ScriptedMaster& master,
                        const std::function<void(CommunicatorOptions&)>& adjust = {}) {
    CommunicatorOptions o;
    o.master_address = master.address();
    o.listen_address = "127.0.0.1:0";
    o.connect_timeout = 10s;
    if (adjust) adjust(o);
    auto s = PeerSession::create(io, o);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    if (s) session = std::move(*s);
  }
  ~ScriptedPeer() {
    if (session) session->close();
  }
};

TEST(PeerSessionDispatch, MessagesLegalInEveryStateDoNotDisturbAdmission) {
  ScriptedMaster master(admit_after({wire::HeartbeatMsg{}, wire::PendingChangedMsg{true},
                                     wire::AbortMsg{0, 0, LH_ERR_PEER_LOST, "a member was lost"}}));
  ScriptedPeer peer(master);
  ASSERT_TRUE(peer.session);
  const Status s = peer.session->connect();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(peer.session->view().epoch, 1u);
  EXPECT_EQ(peer.session->view().peer_id, kScriptedId);
  EXPECT_EQ(peer.session->aborts_seen(), 1u);
  EXPECT_FALSE(peer.session->peers_pending()) << "EPOCH_COMMIT carries the flag";
}

// A message the master sends before admission that the joining session must refuse, and the
// words its error must contain.
struct IllegalMessage {
  wire::ControlMessage message;
  std::string error;
};

TEST(PeerSessionDispatch, AMessageTheStateDoesNotAllowEndsTheSessionAsAProtocolError) {
  const std::vector<IllegalMessage> cases = {
      {wire::WelcomeMsg{kScriptedId, 1000, 3}, "unexpected WELCOME"},
      {wire::EpochCommitMsg{1, 0, false}, "unexpected EPOCH_COMMIT"},
      {wire::TopologyUnchangedMsg{0}, "unexpected TOPOLOGY_UNCHANGED"},
      {wire::ByeMsg{}, "unexpected BYE"},
      {wire::StateCompleteMsg{1}, "unexpected STATE_COMPLETE"},
      {wire::StateSourceLostMsg{1, 1}, "unexpected STATE_SOURCE_LOST"},
      {wire::BatchDecisionMsg{1, 1, true}, "BATCH_DECISION for attempt 1 of epoch 1 not awaited"},
      {wire::NodeAgreedMsg{1, 0}, "NODE_AGREED for point 1 not awaited"},
      {wire::NodeAgreeMsg{1, 1, 0}, "unexpected NODE_AGREE"},  // only rails send it
      {wire::RegisterMsg{}, "unexpected REGISTER"},            // only peers send it
      {wire::PeerHelloMsg{1, 1}, "unexpected PEER_HELLO"},     // only on data links
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.error);
    ScriptedMaster master(admit_after({c.message}));
    ScriptedPeer peer(master);
    ASSERT_TRUE(peer.session);
    const Status s = peer.session->connect();
    EXPECT_EQ(s.code(), LH_ERR_PROTOCOL) << s.to_string();
    EXPECT_NE(s.message().find("the master broke the protocol: " + c.error), std::string::npos)
        << s.to_string();
    EXPECT_EQ(peer.session->failure().code(), LH_ERR_PROTOCOL) << "the failure sticks";
  }
}

// A rail whose master dies while it waits at node agreement point 2 tells the restarted master,
// in its REJOIN, the answer it had to point 1 (which that master gives a sibling the previous one
// never answered), and reports point 2 again.
TEST(PeerSessionDispatch, ARailsRejoinCarriesItsLastNodeAgreementAnswer) {
  std::mutex mu;
  std::condition_variable changed;
  std::optional<wire::RejoinMsg> rejoin;
  std::vector<uint64_t> points;  // of every NODE_AGREE, in order
  bool died = false;
  const auto admit = admit_after({});
  ScriptedMaster master([&](const wire::ControlMessage& m) -> std::vector<wire::ControlMessage> {
    std::lock_guard lock(mu);
    if (const auto* agree = std::get_if<wire::NodeAgreeMsg>(&m)) {
      points.push_back(agree->point);
      if (agree->point == 1) return {wire::NodeAgreedMsg{1, 5}};
      if (!rejoin) {  // dies before answering point 2
        died = true;
        changed.notify_all();
        return {};
      }
      return {wire::NodeAgreedMsg{2, 6}};
    }
    if (const auto* r = std::get_if<wire::RejoinMsg>(&m)) {
      rejoin = *r;
      return {wire::WelcomeMsg{kScriptedId, 1000, 3}};
    }
    return admit(m);
  });
  ScriptedPeer peer(master, [](CommunicatorOptions& o) {
    o.node = "host-1";
    o.rail = 0;
    o.rails = 2;
  });
  ASSERT_TRUE(peer.session);
  ASSERT_TRUE(peer.session->connect().is_ok());
  auto first = peer.session->agree_in_node(/*kind=*/1, /*flags=*/0);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(*first, 5u);
  auto second = std::async(std::launch::async, [&] { return peer.session->agree_in_node(1, 2); });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(changed.wait_for(lock, 10s, [&] { return died; }));
  }
  master.drop_link();
  ASSERT_EQ(second.wait_for(20s), std::future_status::ready) << "point 2 was never answered";
  auto answer = second.get();
  ASSERT_TRUE(answer.is_ok()) << answer.status().to_string();
  EXPECT_EQ(*answer, 6u);
  std::lock_guard lock(mu);
  ASSERT_TRUE(rejoin);
  EXPECT_EQ(rejoin->node_answered, 1u) << "it waits at point 2: its last answer is point 1's";
  EXPECT_EQ(rejoin->node_answer, 5u);
  EXPECT_EQ(points, (std::vector<uint64_t>{1, 2, 2})) << "point 2 reported again after the REJOIN";
}

TEST(PeerSessionDispatch, ARemovalEndsTheSessionWithTheMastersReason) {
  ScriptedMaster master(admit_after({wire::RemovedMsg{LH_ERR_TIMEOUT, "too slow"}}));
  ScriptedPeer peer(master);
  ASSERT_TRUE(peer.session);
  const Status s = peer.session->connect();
  EXPECT_EQ(s.code(), LH_ERR_TIMEOUT) << s.to_string();
  EXPECT_EQ(s.message(), "removed by the master: too slow");
}

// Opens a data link to the admitted peer; `closed` completes when the peer closes it.
struct DataLinkProbe {
  std::shared_ptr<net::Link> link;
  std::shared_ptr<std::promise<Status>> closed = std::make_shared<std::promise<Status>>();

  DataLinkProbe(runtime::IoRuntime& io, uint16_t port) {
    net::TransportOptions transport;
    transport.role = net::Role::kPeer;
    auto l = net::connect_link(io, "127.0.0.1", port, 1, transport);
    EXPECT_TRUE(l.is_ok()) << l.status().to_string();
    if (!l) return;
    link = std::move(*l);
    link->start({}, [closed = closed](const Status& why) { closed->set_value(why); });
  }
  ~DataLinkProbe() {
    if (link) link->close();
  }
  bool closed_within(std::chrono::milliseconds timeout) {
    return closed->get_future().wait_for(timeout) == std::future_status::ready;
  }
};

TEST(MeshDispatch, ADataLinkCarryingAnythingButHellosIsClosed) {
  ScriptedMaster master(admit_after({}));
  ScriptedPeer peer(master);
  ASSERT_TRUE(peer.session);
  ASSERT_TRUE(peer.session->connect().is_ok());
  runtime::IoRuntime io(1);
  const std::vector<std::pair<std::string, std::vector<std::byte>>> cases = {
      {"a control-plane message", wire::encode_control(wire::HeartbeatMsg{})},
      {"a state fetch while no service takes state links",
       wire::encode_control(wire::StateFetchMsg{1, 0, 0, 1, false})},
      {"bytes that decode to no message", {std::byte{0xff}, std::byte{0x00}}},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    DataLinkProbe probe(io, peer.session->listen_port());
    ASSERT_TRUE(probe.link);
    probe.link->send_control(bytes);
    EXPECT_TRUE(probe.closed_within(5s));
  }
  // A PEER_HELLO_ACK with no proposal under way is stale, not a violation.
  DataLinkProbe stale(io, peer.session->listen_port());
  ASSERT_TRUE(stale.link);
  stale.link->send_control(wire::encode_control(wire::PeerHelloAckMsg{1, 1}));
  EXPECT_FALSE(stale.closed_within(300ms));
}

}  // namespace
}  // namespace longhaul::peer
