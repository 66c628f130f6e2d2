// A restarted master passes a rail's node agreement answer, carried by its REJOIN, on to a sibling
// the previous master never answered (docs/protocol.md, "Node agreement"): MasterServer's wiring
// of NodeAgreement, driven over real control links by two rails that rejoin a fresh master.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "master/master.hpp"
#include "net/endpoint.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::master {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Master> start_master() {
  MasterOptions options;
  options.listen_host = "127.0.0.1";
  auto m = Master::create(options);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m) return nullptr;
  (*m)->run();
  return std::move(*m);
}

// A control link to the master that keeps every message it receives.
class ControlClient {
 public:
  explicit ControlClient(uint16_t port) {
    auto link = net::connect_link(io_, "127.0.0.1", port, 1, {});
    EXPECT_TRUE(link.is_ok()) << link.status().to_string();
    if (!link) return;
    link_ = *link;
    link_->start(
        [this](std::vector<std::byte> bytes) {
          auto message = wire::decode_control(bytes);
          std::lock_guard lock(mu_);
          if (message) received_.push_back(*std::move(message));
          changed_.notify_all();
        },
        [](const Status&) {});
  }
  ~ControlClient() {
    if (link_) link_->close();
  }
  void send(const wire::ControlMessage& message) {
    link_->send_control(wire::encode_control(message));
  }
  // The first message of type M received (within `timeout`), or nullopt.
  template <class M>
  std::optional<M> wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    std::optional<M> found;
    changed_.wait_for(lock, timeout, [&] {
      for (const auto& m : received_)
        if (const auto* hit = std::get_if<M>(&m)) found = *hit;
      return found.has_value();
    });
    return found;
  }

 private:
  runtime::IoRuntime io_{1};
  std::shared_ptr<net::Link> link_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<wire::ControlMessage> received_;
};

// Rail `rail` of node "n" (2 rails, rail r in group r), peer 11 + rail, rejoining in epoch 5 with
// the answer `answer` to node agreement point `answered`.
wire::RejoinMsg rail_rejoin(uint32_t rail, uint64_t answered, uint32_t answer) {
  wire::RejoinMsg m;
  m.peer_id = 11 + rail;
  m.group = rail;
  m.advertised_host = "127.0.0.1";
  m.advertised_port = static_cast<uint16_t>(4011 + rail);
  m.node = "n";
  m.rail = rail;
  m.rails = 2;
  m.epoch = 5;
  m.world = 2;
  m.ring = {m.peer_id};
  m.node_answered = answered;
  m.node_answer = answer;
  return m;
}

// The previous master answered point 7 to rail 0 (answer 5) and died before its answer reached
// rail 1, which reports point 7 again. Rail 0 reports nothing more (it re-forms, waiting for
// rail 1 in update_topology). Rail 1 gets answer 5, whichever reaches the master first.
TEST(NodeRejoin, ARailWaitingForAnAnswerItsSiblingHadGetsItFromTheSiblingsRejoin) {
  for (const bool rejoin_first : {true, false}) {
    SCOPED_TRACE(rejoin_first ? "rail 0 rejoins first" : "rail 1 reports first");
    auto master = start_master();
    ASSERT_TRUE(master);
    ControlClient ahead(master->port()), behind(master->port());
    if (rejoin_first) {
      ahead.send(rail_rejoin(0, 7, 5));
      ASSERT_TRUE(ahead.wait_for<wire::WelcomeMsg>(5s));
    }
    behind.send(rail_rejoin(1, 6, 1));
    ASSERT_TRUE(behind.wait_for<wire::WelcomeMsg>(5s));
    behind.send(wire::NodeAgreeMsg{7, 1, 4});
    if (!rejoin_first) {
      EXPECT_FALSE(behind.wait_for<wire::NodeAgreedMsg>(300ms)) << "rail 0 has not rejoined";
      ahead.send(rail_rejoin(0, 7, 5));
      ASSERT_TRUE(ahead.wait_for<wire::WelcomeMsg>(5s));
    }
    const auto agreed = behind.wait_for<wire::NodeAgreedMsg>(5s);
    ASSERT_TRUE(agreed) << "the answer rail 0 rejoined with never reached rail 1";
    EXPECT_EQ(agreed->point, 7u);
    EXPECT_EQ(agreed->flags, 5u) << "rail 0's answer, not rail 1's flags";
    EXPECT_FALSE(ahead.wait_for<wire::NodeAgreedMsg>(100ms)) << "rail 0 had its answer";
  }
}

// Rails of one node cannot have had different answers to one point: the second to rejoin is
// removed for breaking the protocol, and its node with it.
TEST(NodeRejoin, RailsRejoiningWithDifferentAnswersAreRemovedWithTheirNode) {
  auto master = start_master();
  ASSERT_TRUE(master);
  ControlClient first(master->port()), second(master->port());
  first.send(rail_rejoin(0, 3, 1));
  ASSERT_TRUE(first.wait_for<wire::WelcomeMsg>(5s));
  second.send(rail_rejoin(1, 3, 0));
  const auto removed = second.wait_for<wire::RemovedMsg>(5s);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->code, LH_ERR_PROTOCOL);
  EXPECT_NE(removed->reason.find("had answer 0 to node agreement point 3, a sibling had answer 1"),
            std::string::npos)
      << removed->reason;
  const auto evicted = first.wait_for<wire::RemovedMsg>(5s);
  ASSERT_TRUE(evicted) << "its sibling stays";
  EXPECT_EQ(evicted->code, LH_ERR_NODE_EVICTED) << evicted->reason;
}

}  // namespace
}  // namespace longhaul::master
