// Failure detection and recovery beyond clean kills: a frozen peer (socket open, process silent)
// found by missed heartbeats, a peer whose advertised address nobody can reach, and the whole
// protocol over TLS.
#include <signal.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cluster.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

TEST(Failure, FrozenPeerIsDeclaredDeadByMissedHeartbeats) {
  Cluster cluster({"--heartbeat-interval-ms", "200", "--heartbeat-misses", "3"});
  std::vector<Child*> peers;
  for (int i = 0; i < 3; ++i) peers.push_back(&cluster.add_peer());
  ASSERT_TRUE(cluster.wait_agreement(peers, 3));
  Child* frozen = peers[1];
  frozen->kill(SIGSTOP);  // like a cable cut: the sockets stay open, nothing is sent
  peers.erase(peers.begin() + 1);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster.wait_agreement(peers, 2, 20s));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 400ms) << "declared dead before missing its heartbeats";
  EXPECT_NE(cluster.master().stderr_text().find("missed 3 heartbeats"), std::string::npos)
      << cluster.master().stderr_text();
  // Thawed, the old peer finds itself out of the run instead of hanging.
  frozen->kill(SIGCONT);
  EXPECT_EQ(frozen->wait_exit(20s), 3);
  EXPECT_FALSE(frozen->last_line("ERROR").empty());
}

TEST(Failure, PeerNobodyCanReachIsEvictedWithTheReason) {
  Cluster cluster;
  std::vector<Child*> peers;
  for (int i = 0; i < 3; ++i) peers.push_back(&cluster.add_peer());
  ASSERT_TRUE(cluster.wait_agreement(peers, 3));
  // It advertises a port where nothing listens (a broken NAT forward): the peers that must
  // connect to it fail, it waits for connections that never come.
  Child& unreachable =
      cluster.add_peer({"--advertise", "127.0.0.1:1", "--link-timeout-ms", "1500"});
  EXPECT_EQ(unreachable.wait_exit(60s), 3);
  const std::string error = unreachable.last_line("ERROR");
  EXPECT_NE(error.find("removed by the master"), std::string::npos) << error;
  EXPECT_NE(error.find("cannot reach peers"), std::string::npos) << error;
  ASSERT_TRUE(cluster.wait_agreement(peers, 3));
  EXPECT_NE(cluster.master().stderr_text().find("cannot reach peer"), std::string::npos);
}

TEST(Failure, EverythingWorksOverTls) {
  TempDir certs;
  TestCertificate tls;
  ASSERT_TRUE(make_test_certificate(certs, &tls));
  const std::string &cert = tls.cert, &key = tls.key;
  const std::string secret = certs.path() + "/secret";
  std::ofstream(secret) << "tls cluster secret\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read);
  Cluster cluster({"--tls-cert", cert, "--tls-key", key, "--secret-file", secret});
  const std::vector<std::string> args = {
      "--tls-cert", cert, "--tls-key", key, "--secret", "tls cluster secret", "--connections", "2"};
  std::vector<Child*> peers;
  for (int i = 0; i < 4; ++i) peers.push_back(&cluster.add_peer(args));
  ASSERT_TRUE(cluster.wait_agreement(peers, 4));
  peers[3]->send("leave");
  EXPECT_EQ(peers[3]->wait_exit(20s), 0);
  peers.pop_back();
  ASSERT_TRUE(cluster.wait_agreement(peers, 3));
  // A plaintext peer cannot talk to a TLS master.
  Child& plain =
      cluster.add_peer({"--secret", "tls cluster secret", "--connect-timeout-ms", "5000"});
  EXPECT_EQ(plain.wait_exit(30s), 3);
  EXPECT_FALSE(plain.last_line("ERROR").empty());
}

}  // namespace
}  // namespace longhaul::testing
