// A longhaul-master and test peers whose data links all cross longhaul-wanem routes with latency:
// each peer advertises its route's port, and the route's target is set to the peer's real
// listen port once the peer has printed it (connections arriving before wait for it).
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "cluster.hpp"
#include "wanem_support.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

uint64_t stat_value(const std::string& stats, const std::string& key) {
  std::istringstream in(stats);
  std::string word;
  while (in >> word)
    if (word.rfind(key + "=", 0) == 0) return std::stoull(word.substr(key.size() + 1));
  return 0;
}

TEST(WanemCluster, PeersFormARingThroughTheEmulatorWithLatency) {
  constexpr int kPeers = 3;
  std::vector<std::string> args = {"--latency-ms", "20", "--jitter-ms", "2"};
  for (int i = 0; i < kPeers; ++i)
    args.insert(args.end(), {"--route", "p" + std::to_string(i) + "=127.0.0.1:0>-"});
  Wanem wanem(args);
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Cluster cluster;
  std::vector<Child*> peers;
  for (int i = 0; i < kPeers; ++i) {
    const std::string route = "p" + std::to_string(i);
    Child& peer =
        cluster.add_peer({"--advertise", "127.0.0.1:" + std::to_string(wanem.port(route))});
    auto listen =
        peer.wait_line([](const std::string& l) { return l.rfind("LISTEN ", 0) == 0; }, 30s);
    ASSERT_TRUE(listen) << peer.stderr_text();
    const std::string target = "127.0.0.1:" + listen->substr(7);
    ASSERT_EQ(wanem.command("target " + route + " " + target), "OK TARGET " + route + " " + target);
    peers.push_back(&peer);
  }
  ASSERT_TRUE(cluster.wait_agreement(peers, kPeers));
  // Each link is dialed by one of its two peers to the other's advertised address, so every
  // link of the 3-ring came in through a route, with the added latency on its bytes: at least two
  // routes carried links. The master also probes each newcomer's advertised address once at
  // registration (docs/security.md: a connection that sends nothing), so a route whose peer
  // dialed all its links itself accepted that probe alone and carried no bytes.
  uint64_t accepted = 0;
  int routes_with_links = 0;
  for (int i = 0; i < kPeers; ++i) {
    const std::string stats = wanem.command("stats p" + std::to_string(i));
    accepted += stat_value(stats, "accepted");
    const bool carried = stat_value(stats, "up_bytes") > 0 && stat_value(stats, "down_bytes") > 0;
    if (stat_value(stats, "accepted") >= 2) {
      EXPECT_TRUE(carried) << "a link and the probe: " << stats;
    }
    routes_with_links += carried ? 1 : 0;
  }
  EXPECT_GE(routes_with_links, 2);
  EXPECT_GE(accepted, static_cast<uint64_t>(kPeers));
}

}  // namespace
}  // namespace longhaul::testing
