// longhaul-churn's train workload (tools/longhaul-churn/peer_command.hpp, train_outcome.hpp): the
// command lines of its peers, the summaries it reads, and the end-of-run checks that fail it.
#include <gtest/gtest.h>

#include <algorithm>

#include "peer_command.hpp"
#include "train_outcome.hpp"

namespace longhaul_churn {
namespace {

// The value after `flag` in argv, or "" (and "absent" when the flag is not there at all).
std::string value_of(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  if (it == argv.end()) return "absent";
  return it + 1 == argv.end() ? "" : *(it + 1);
}

Flags train_flags() {
  Flags f;
  f.workload = Workload::kTrain;
  f.peers = 4;
  f.train_steps = 1200;
  return f;
}

TEST(PeerCommand, AReplacementTrainPeerJoinsOnTheShardItWasGiven) {
  PeerLaunch l{"/bin/longhaul-train", 4242, 0, 3, true, "/logs/p9", "", 0, {}};
  const auto argv = peer_command(train_flags(), l);
  EXPECT_EQ(argv[0], "/bin/longhaul-train");
  EXPECT_EQ(value_of(argv, "--master"), "127.0.0.1:4242");
  EXPECT_EQ(value_of(argv, "--peers"), "4");
  EXPECT_EQ(value_of(argv, "--peer-index"), "3");
  EXPECT_EQ(value_of(argv, "--steps"), "1200");
  EXPECT_EQ(value_of(argv, "--out"), "/logs/p9");
  EXPECT_EQ(value_of(argv, "--theta-every"), "1");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--join"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--json"), argv.end());
  EXPECT_EQ(value_of(argv, "--method"), "diloco");
  EXPECT_EQ(value_of(argv, "--sync-every"), "20");
  EXPECT_EQ(value_of(argv, "--advertise"), "absent");
  l.join = false;
  const auto initial = peer_command(train_flags(), l);
  EXPECT_EQ(std::find(initial.begin(), initial.end(), "--join"), initial.end());
}

TEST(PeerCommand, TheUsersTrainArgumentsReplaceTheDefaults) {
  Flags f = train_flags();
  f.train_args = {"--layers=3", "--method", "dp", "--data=/corpus.txt"};
  const auto argv =
      peer_command(f, PeerLaunch{"/bin/longhaul-train", 1, 0, 0, false, "/o", "", 0, {}});
  EXPECT_EQ(value_of(argv, "--layers"), "absent");  // only the user's --layers=3
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--layers=3"), argv.end());
  EXPECT_EQ(value_of(argv, "--method"), "dp");
  // The engine's --sync-every would be refused with --method dp: the method's defaults go with it.
  EXPECT_EQ(value_of(argv, "--sync-every"), "absent");
  EXPECT_EQ(value_of(argv, "--channels"), "32");
  EXPECT_EQ(argv.back(), "--data=/corpus.txt");
}

TEST(PeerCommand, ThePeerWorkloadRunsLonghaulPeerWithItsDefaults) {
  Flags f;
  f.peer_args = {"--step-delay-ms=5"};
  const auto argv =
      peer_command(f, PeerLaunch{"/bin/longhaul-peer", 7, 9000, 0, false, "", "", 0, {}});
  EXPECT_EQ(value_of(argv, "--advertise"), "127.0.0.1:9000");
  EXPECT_EQ(value_of(argv, "--tensor-size"), "65536,1025");
  EXPECT_EQ(value_of(argv, "--step-delay-ms"), "absent");
  EXPECT_EQ(value_of(argv, "--theta-every"), "absent");
  EXPECT_EQ(argv.back(), "--step-delay-ms=5");
}

TEST(PeerCommand, APeerInThePacketLabRunsInItsSitesNamespaceAtItsAddress) {
  const auto argv =
      peer_command(Flags{}, PeerLaunch{"/bin/longhaul-peer", 7, 0, 0, false, "", "", 0, {}},
                   PeerPlace{"10.214.0.1", "10.214.0.3", "lhw-42-us"});
  ASSERT_GE(argv.size(), 5u);
  EXPECT_EQ((std::vector<std::string>(argv.begin(), argv.begin() + 5)),
            (std::vector<std::string>{"ip", "netns", "exec", "lhw-42-us", "/bin/longhaul-peer"}));
  EXPECT_EQ(value_of(argv, "--master"), "10.214.0.1:7");
  EXPECT_EQ(value_of(argv, "--listen"), "10.214.0.3:0");
}

TEST(PeerCommand, TheRunsTlsAndSecretFilesGoToEveryPeer) {
  PeerLaunch l{"/bin/longhaul-peer", 7, 0, 0, false, "", "", 0, {}};
  l.security = {"--tls-cert",        "/logs/tls-cert.pem", "--tls-key",
                "/logs/tls-key.pem", "--secret-file",      "/logs/secret"};
  const auto argv = peer_command(Flags{}, l);
  EXPECT_EQ(value_of(argv, "--tls-cert"), "/logs/tls-cert.pem");
  EXPECT_EQ(value_of(argv, "--tls-key"), "/logs/tls-key.pem");
  EXPECT_EQ(value_of(argv, "--secret-file"), "/logs/secret");
  l.security.clear();
  EXPECT_EQ(value_of(peer_command(Flags{}, l), "--secret-file"), "absent");
}

const char* kSummary =
    R"({"mode":"peer","method":"diloco","peer_id":3,"stopped":false,"steps":1200,"batch":4,)"
    R"("context":32,"final_val_loss":2.12345,"state_hash":"00000000deadbeef"})";

TEST(TrainSummary, OnlyLonghaulTrainsSummaryLineIsOne) {
  const auto s = parse_train_summary("p3", kSummary);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->peer, "p3");
  EXPECT_EQ(s->steps, 1200);
  EXPECT_FALSE(s->stopped);
  EXPECT_DOUBLE_EQ(*s->val_loss, 2.12345);
  EXPECT_EQ(s->state_hash, "00000000deadbeef");
  EXPECT_EQ(s->batch * s->context, 128);
  EXPECT_FALSE(parse_train_summary("p3", "THETA step=1 hash=00 world=2 epoch=1"));
  EXPECT_FALSE(parse_train_summary("p3", R"({"result":"pass"})"));
  EXPECT_FALSE(parse_train_summary("p3", "{not json"));
}

TrainSummary survivor(const std::string& peer, double loss, const std::string& hash) {
  TrainSummary s;
  s.peer = peer;
  s.steps = 1200;
  s.val_loss = loss;
  s.state_hash = hash;
  s.batch = 4;
  s.context = 32;
  return s;
}

TEST(JudgeSurvivors, SurvivorsAtTheLastStepWithOneThetaPass) {
  TrainSummary left = survivor("p2", 3.0, "ff");
  left.stopped = true;  // a graceful leave mid-run: not a survivor
  left.steps = 500;
  const TrainEnd end =
      judge_survivors({survivor("p1", 2.5, "aa"), left, survivor("p5", 2.5, "aa")}, 1200);
  EXPECT_TRUE(end.problems.empty());
  EXPECT_EQ(end.survivors, 2u);
  EXPECT_DOUBLE_EQ(end.val_loss, 2.5);
  EXPECT_EQ(end.tokens_per_batch, 128);
}

TEST(JudgeSurvivors, DifferentThetaShortRunsAndNoSurvivorsAreViolations) {
  TrainSummary short_run = survivor("p4", 2.5, "aa");
  short_run.steps = 1100;
  TrainEnd end =
      judge_survivors({survivor("p1", 2.5, "aa"), survivor("p2", 2.5, "bb"), short_run}, 1200);
  ASSERT_EQ(end.problems.size(), 2u);
  EXPECT_NE(end.problems[0].find("different theta_g"), std::string::npos);
  EXPECT_NE(end.problems[1].find("p4 ended at step 1100"), std::string::npos);
  end = judge_survivors({}, 1200);
  ASSERT_EQ(end.problems.size(), 1u);
  EXPECT_NE(end.problems[0].find("no peer trained to the end"), std::string::npos);
}

TEST(CompareLosses, ARatioAboveTheBoundIsAViolation) {
  EXPECT_FALSE(compare_losses(2.06, 2.0, 1.03).problem);
  EXPECT_DOUBLE_EQ(compare_losses(2.06, 2.0, 1.03).ratio, 1.03);
  const LossComparison worse = compare_losses(2.1, 2.0, 1.03);
  ASSERT_TRUE(worse.problem);
  EXPECT_NE(worse.problem->find("1.05000 times"), std::string::npos);
  EXPECT_TRUE(compare_losses(2.0, 0.0, 1.03).problem);  // no reference: never a pass
}

TEST(EqualTokenSteps, TheReferenceTrainsOnTheChurnRunsTokens) {
  TrainRun churn;
  churn.world_steps = 4 * 1000 - 7;  // four peers, seven peer-steps short
  EXPECT_EQ(equal_token_steps(churn, 4), 998);
  churn.world_steps = 4 * 1000 - 1;  // rounds to the nearest step
  EXPECT_EQ(equal_token_steps(churn, 4), 1000);
  churn.world_steps = 0;  // never a run of no steps
  EXPECT_EQ(equal_token_steps(churn, 4), 1);
}

}  // namespace
}  // namespace longhaul_churn
