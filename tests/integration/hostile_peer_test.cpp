// Members that know the secret and misbehave against another peer's data listener (issue 24,
// item 6): links parked by a PEER_HELLO for an epoch the peer has not seen, links that never
// introduce themselves, and STATE_FETCHes the peer refuses. Real peer processes on loopback; the
// attacker is this process, speaking the wire protocol over net::Link.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <thread>

#include "cluster.hpp"
#include "net/endpoint.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kFarFutureEpoch = uint64_t{1} << 62;

// The port of a test_peer's data listener, from its "LISTEN <port>" line; 0 if none came.
uint16_t listen_port(Child& peer) {
  auto line = peer.wait_line([](const std::string& l) { return l.rfind("LISTEN ", 0) == 0; }, 30s);
  return line ? static_cast<uint16_t>(std::stoul(line->substr(7))) : 0;
}

// A data link to 127.0.0.1:port, started; counts the control messages that come back.
struct Attacker {
  std::shared_ptr<net::Link> link;
  std::shared_ptr<std::atomic<int>> answers = std::make_shared<std::atomic<int>>(0);
};

Attacker open_link(runtime::IoRuntime& io, uint16_t port) {
  Attacker a;
  auto link = net::connect_link(io, "127.0.0.1", port, 1, {});
  if (!link) {
    ADD_FAILURE() << link.status().to_string();
    return a;
  }
  a.link = *link;
  a.link->start([answers = a.answers](std::vector<std::byte>) { answers->fetch_add(1); });
  return a;
}

size_t count_open(const std::vector<Attacker>& links) {
  size_t open = 0;
  for (const auto& a : links) open += a.link && a.link->failure().is_ok() ? 1 : 0;
  return open;
}

// How long until the peer closes `a`'s link, waiting at most `limit`.
std::chrono::milliseconds lifetime(const Attacker& a, Clock::time_point since,
                                   std::chrono::milliseconds limit) {
  while (a.link->failure().is_ok() && Clock::now() - since < limit)
    std::this_thread::sleep_for(10ms);
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
}

// A line of /proc/<pid>/status in bytes ("VmRSS", "VmHWM": the peak), 0 if absent.
uint64_t status_bytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  return 0;
}

// A link that has not introduced itself may send only short CONTROL messages: a longer one
// closes it from its header, before anything is allocated for it. The old tree allocated and
// read each announced 16 MiB (value-initialized, so resident) before finding it undecodable.
TEST(HostilePeer, AnUnintroducedLinkMayNotSendALargeControlMessage) {
  Cluster cluster;
  Child& victim = cluster.add_peer();
  const uint16_t port = listen_port(victim);
  ASSERT_NE(port, 0) << victim.stderr_text();
  ASSERT_TRUE(cluster.wait_agreement({&victim}, 1, 30s));
  runtime::IoRuntime io(2);
  constexpr size_t kLinks = 16;
  std::vector<Attacker> links;
  for (size_t i = 0; i < kLinks; ++i) {
    links.push_back(open_link(io, port));
    ASSERT_TRUE(links.back().link);
  }
  const uint64_t peak0 = status_bytes(victim.pid(), "VmHWM");
  const auto t0 = Clock::now();
  for (auto& a : links)
    a.link->send_control(std::vector<std::byte>((16u << 20) - 64, std::byte{0xff}));
  while (count_open(links) > 0 && Clock::now() - t0 < 20s) std::this_thread::sleep_for(10ms);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  const uint64_t peak = status_bytes(victim.pid(), "VmHWM");
  std::cerr << kLinks << " links sending a 16 MiB CONTROL message before introducing themselves: "
            << "all closed after " << took.count() << " ms; the peer's peak RSS "
            << peak0 / 1024 / 1024 << " MiB -> " << peak / 1024 / 1024 << " MiB\n";
  EXPECT_EQ(count_open(links), 0u);
  EXPECT_LT(peak, peak0 + (64u << 20));
  EXPECT_NE(victim.stderr_text().find("this link takes at most 1024"), std::string::npos);
  EXPECT_TRUE(cluster.wait_agreement({&victim}, 1, 5s));
}

// A PEER_HELLO for an epoch the peer has not been proposed is parked (an honest neighbour that
// heard of the epoch first sends one), but only until the link timeout: the old tree kept a link
// introduced for epoch 2^62 open for good.
TEST(HostilePeer, AHelloForAFarFutureEpochIsParkedOnlyUntilTheLinkTimeout) {
  Cluster cluster;
  Child& victim = cluster.add_peer({"--link-timeout-ms", "2000"});
  const uint16_t port = listen_port(victim);
  ASSERT_NE(port, 0) << victim.stderr_text();
  ASSERT_TRUE(cluster.wait_agreement({&victim}, 1, 30s));
  runtime::IoRuntime io(2);
  Attacker a = open_link(io, port);
  ASSERT_TRUE(a.link);
  const auto t0 = Clock::now();
  a.link->send_control(wire::encode_control(wire::PeerHelloMsg{kFarFutureEpoch, 1ull << 40}));
  const auto lived = lifetime(a, t0, 10s);
  std::cerr << "a link parked by a PEER_HELLO for epoch 2^62 lived " << lived.count()
            << " ms (link timeout 2000 ms; waited at most 10000 ms)\n";
  EXPECT_GE(lived, 1500ms);  // parked, not refused: an honest early hello waits for its epoch
  EXPECT_LT(lived, 4000ms);
  a.link->close();
  EXPECT_TRUE(cluster.wait_agreement({&victim}, 1, 5s));
}

// 300 links parked under 300 claimed peer ids and 300 links that never say a word: the peer holds
// at most 256 of each (a group has at most 256 members) and closes the oldest beyond that, long
// before the link timeout; an honest peer still joins. The old tree held all 600 until the link
// timeout, and the parked ones for good.
TEST(HostilePeer, ParkedAndSilentLinksAreBoundedAndAnHonestPeerStillJoins) {
  Cluster cluster;
  Child& victim = cluster.add_peer({"--link-timeout-ms", "30000"});
  const uint16_t port = listen_port(victim);
  ASSERT_NE(port, 0) << victim.stderr_text();
  ASSERT_TRUE(cluster.wait_agreement({&victim}, 1, 30s));
  runtime::IoRuntime io(2);
  constexpr size_t kLinks = 300;
  std::vector<Attacker> parked, silent;
  for (size_t i = 0; i < kLinks; ++i) {
    parked.push_back(open_link(io, port));
    ASSERT_TRUE(parked.back().link);
    parked.back().link->send_control(
        wire::encode_control(wire::PeerHelloMsg{kFarFutureEpoch, 1000 + i}));
  }
  for (size_t i = 0; i < kLinks; ++i) {
    silent.push_back(open_link(io, port));
    ASSERT_TRUE(silent.back().link);
  }
  std::this_thread::sleep_for(1s);
  const size_t parked_open = count_open(parked), silent_open = count_open(silent);
  std::cerr << "of " << kLinks << " parked links " << parked_open << " still open, of " << kLinks
            << " silent links " << silent_open << " still open, 1 s after the last (link timeout "
            << "30000 ms)\n";
  EXPECT_LE(parked_open, 256u);
  EXPECT_LE(silent_open, 256u);
  EXPECT_GE(parked_open + silent_open, 256u);  // the bound closes the excess, not everything
  Child& honest = cluster.add_peer();
  EXPECT_TRUE(cluster.wait_agreement({&victim, &honest}, 2, 30s));
  for (auto* v : {&parked, &silent})
    for (auto& a : *v) a.link->close();
}

// A STATE_FETCH the peer refuses (here: it is not in a sync) is answered STATE_FETCH_FAILED, which
// an honest fetcher needs to drop the source with a reason, and then the link is closed: the old
// tree left every such link open for good.
TEST(HostilePeer, ARefusedStateFetchClosesItsLink) {
  Cluster cluster;
  Child peer(
      {LONGHAUL_STATE_PEER_BIN, "--master", cluster.master_address(), "--layout", "w:f32:1024"},
      cluster.dir().path() + "/state_peer.log");
  ASSERT_TRUE(peer.wait_line([](const std::string& l) { return l.rfind("ready", 0) == 0; }, 30s))
      << peer.stderr_text();
  // After one sync the peer routes state links to its block server, which refuses fetches
  // between syncs.
  peer.send("sync enforce");
  ASSERT_TRUE(
      peer.wait_line([](const std::string& l) { return l.rfind("sync LH_OK", 0) == 0; }, 30s))
      << peer.stderr_text();
  peer.send("port");
  auto line = peer.wait_line([](const std::string& l) { return l.rfind("port ", 0) == 0; }, 10s);
  ASSERT_TRUE(line.has_value());
  const auto port = static_cast<uint16_t>(std::stoul(line->substr(5)));
  runtime::IoRuntime io(2);
  constexpr size_t kLinks = 50;
  std::vector<Attacker> fetchers;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < kLinks; ++i) {
    fetchers.push_back(open_link(io, port));
    ASSERT_TRUE(fetchers.back().link);
    fetchers.back().link->send_control(
        wire::encode_control(wire::StateFetchMsg{1, 0, 0, 1, false}));
  }
  while (count_open(fetchers) > 0 && Clock::now() - t0 < 3s) std::this_thread::sleep_for(10ms);
  size_t answered = 0;
  for (const auto& a : fetchers) answered += a.answers->load() > 0 ? 1 : 0;
  std::cerr << "of " << kLinks << " links whose STATE_FETCH was refused, " << count_open(fetchers)
            << " still open after 3 s; " << answered << " got the refusal\n";
  EXPECT_EQ(count_open(fetchers), 0u);
  EXPECT_EQ(answered, kLinks);
  for (auto& a : fetchers) a.link->close();
  // The peer's own syncs go on.
  const size_t from = peer.lines().size();
  peer.send("sync enforce");
  EXPECT_TRUE(
      peer.wait_line([](const std::string& l) { return l.rfind("sync LH_OK", 0) == 0; }, 30s, from))
      << peer.stderr_text();
}

}  // namespace
}  // namespace longhaul::testing
