// Membership churn with real processes: peers join, join late, leave gracefully and are SIGKILLed;
// every survivor must end in the same epoch with the same ring.
#include <signal.h>

#include <gtest/gtest.h>

#include <thread>

#include "cluster.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

TEST(Churn, JoinLateJoinLeaveAndKillEndInOneEpochAndRing) {
  Cluster cluster;
  ASSERT_NE(cluster.port(), 0);
  std::vector<Child*> peers;
  for (int i = 0; i < 8; ++i) peers.push_back(&cluster.add_peer());
  ASSERT_TRUE(cluster.wait_agreement(peers, 8));

  for (int i = 0; i < 3; ++i) peers.push_back(&cluster.add_peer());
  ASSERT_TRUE(cluster.wait_agreement(peers, 11));
  const uint64_t epoch_11 = parse_epoch_line(peers[0]->last_line("EPOCH "))->epoch;

  // Two leave gracefully.
  Child* leaver_a = peers[2];
  Child* leaver_b = peers[9];
  leaver_a->send("leave");
  leaver_b->send("leave");
  EXPECT_EQ(leaver_a->wait_exit(30s), 0);
  EXPECT_EQ(leaver_b->wait_exit(30s), 0);
  EXPECT_FALSE(leaver_a->last_line("LEFT").empty());
  std::erase(peers, leaver_a);
  std::erase(peers, leaver_b);
  ASSERT_TRUE(cluster.wait_agreement(peers, 9));
  const uint64_t epoch_9 = parse_epoch_line(peers[0]->last_line("EPOCH "))->epoch;
  EXPECT_GT(epoch_9, epoch_11);

  // Two are SIGKILLed while the others wait in update_topology: both victims stop calling it, the
  // first is killed (so the survivors start waiting for the second), then the second.
  Child* victim_a = peers[0];
  Child* victim_b = peers[5];
  victim_a->send("pause");
  victim_b->send("pause");
  ASSERT_TRUE(victim_a->wait_line([](const std::string& l) { return l == "PAUSED"; }, 10s));
  ASSERT_TRUE(victim_b->wait_line([](const std::string& l) { return l == "PAUSED"; }, 10s));
  std::erase(peers, victim_a);
  std::erase(peers, victim_b);
  std::vector<size_t> seen;
  for (Child* p : peers) seen.push_back(p->lines().size());
  victim_a->kill(SIGKILL);
  EXPECT_TRUE(victim_a->wait_exit(10s).has_value());
  for (size_t i = 0; i < peers.size(); ++i) {
    EXPECT_TRUE(peers[i]->wait_line([](const std::string& l) { return starts_with(l, "UPDATE "); },
                                    30s, seen[i]))
        << "survivor " << i << " never entered update_topology";
  }
  // They wait for the paused victim: nobody moves on while it lives.
  std::this_thread::sleep_for(300ms);
  for (Child* p : peers) EXPECT_EQ(parse_epoch_line(p->last_line("EPOCH "))->epoch, epoch_9);
  victim_b->kill(SIGKILL);
  EXPECT_TRUE(victim_b->wait_exit(10s).has_value());
  ASSERT_TRUE(cluster.wait_agreement(peers, 7));
  for (Child* p : peers) {
    auto e = parse_epoch_line(p->last_line("EPOCH "));
    EXPECT_GT(e->epoch, epoch_9);
    EXPECT_GE(e->aborts, 1) << "a survivor was not told to abort when its group lost a peer";
    EXPECT_TRUE(p->last_line("ERROR").empty()) << p->last_line("ERROR");
  }
  EXPECT_TRUE(cluster.master().running());
  const std::string log = cluster.master().stderr_text();
  EXPECT_NE(log.find("left gracefully"), std::string::npos) << log;
  EXPECT_NE(log.find("connection lost"), std::string::npos) << log;
}

TEST(Churn, GroupsGetTheirOwnRings) {
  Cluster cluster;
  std::vector<Child*> peers;
  for (int i = 0; i < 5; ++i)
    peers.push_back(&cluster.add_peer({"--group", std::to_string(i % 2), "--connections", "2"}));
  ASSERT_TRUE(cluster.wait_agreement(peers, 5));
  for (size_t i = 0; i < peers.size(); ++i) {
    auto e = parse_epoch_line(peers[i]->last_line("EPOCH "));
    EXPECT_EQ(e->groups, 2);
    EXPECT_EQ(e->group_world, i % 2 == 0 ? 3 : 2);
    EXPECT_EQ(e->ring.size(), static_cast<size_t>(e->group_world));
    EXPECT_LT(e->rank, e->group_world);
  }
  // A kill in group 1 leaves group 1 with one peer and group 0 untouched in size.
  peers[1]->kill(SIGKILL);
  peers[1]->wait_exit(10s);
  peers.erase(peers.begin() + 1);
  ASSERT_TRUE(cluster.wait_agreement(peers, 4));
}

TEST(Churn, MasterSigtermEndsPeersWithPeerLost) {
  Cluster cluster;
  Child& peer = cluster.add_peer();
  ASSERT_TRUE(cluster.wait_agreement({&peer}, 1));
  cluster.master().kill(SIGTERM);
  EXPECT_EQ(cluster.master().wait_exit(10s), 0) << "SIGTERM must shut the master down cleanly";
  EXPECT_NE(cluster.master().stderr_text().find("shutting down"), std::string::npos);
  // The idle peer learns it at once (closed socket), not at its next call.
  EXPECT_TRUE(peer.wait_line(
      [](const std::string& l) {
        return l.rfind("ABORT", 0) == 0 && l.find("LH_ERR_PEER_LOST") != std::string::npos &&
               l.find("master") != std::string::npos;
      },
      5s))
      << "the peer did not notice the master going away";
}

}  // namespace
}  // namespace longhaul::testing
