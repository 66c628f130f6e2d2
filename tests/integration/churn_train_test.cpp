// longhaul-churn --workload train (issue 20): longhaul-train peers train one GPT for about a
// minute while the supervisor SIGKILLs, SIGTERMs and SIGSTOPs them and replacements join. Every
// peer reports the hash of theta_g after every step: no two may differ at one step. The
// survivors' final validation loss must be within 1.075x of a churn-free run of the same peers at
// equal tokens, which longhaul-churn runs after the churn run in the same invocation. The bound is
// the mean plus four standard deviations of the ratios measured over seeds, kill intervals and
// machine speeds (docs/training.md, "What churn costs").
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

// The repository's documentation (about 0.3 MB of English and code): text the tiny model is still
// learning after thousands of steps, so a churn that damaged training would show in the loss (a
// small grammar's loss reaches its floor whatever happens). One --train-arg per file, in name
// order: longhaul-train holds every tenth one out for validation.
std::vector<std::string> docs_data_args() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(LONGHAUL_DOCS_DIR))
    if (e.path().extension() == ".md") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<std::string> args;
  for (const auto& f : files) args.push_back("--train-arg=--data=" + f);
  return args;
}

// longhaul-churn must never outlive the test: on any early return it is asked to stop (SIGTERM
// makes it SIGKILL and reap every process it started) before the Child guard SIGKILLs it.
struct StopOnExit {
  Child& churn;
  ~StopOnExit() {
    if (!churn.running()) return;
    churn.kill(SIGTERM);
    (void)churn.wait_exit(30s);
  }
};

TEST(ChurnTrain, TrainersUnderChurnKeepOneThetaAndReachTheChurnFreeLoss) {
  TempDir dir;
  std::vector<std::string> argv = {LONGHAUL_CHURN_BIN,
                                   "--workload",
                                   "train",
                                   "--peers",
                                   "4",
                                   "--duration",
                                   "60",
                                   "--train-steps",
                                   LONGHAUL_CHURN_TRAIN_STEPS,
                                   "--kill-interval-ms",
                                   "2500",
                                   "--min-alive",
                                   "2",
                                   "--seed",
                                   "1",
                                   "--status",
                                   "--json"};
  const std::vector<std::string> data = docs_data_args();
  ASSERT_GE(data.size(), 5u) << "no documentation in " << LONGHAUL_DOCS_DIR;
  argv.insert(argv.end(), data.begin(), data.end());
  Child churn(argv, dir.path() + "/churn.err");
  StopOnExit stop{churn};
  const std::optional<int> rc = churn.wait_exit(std::chrono::seconds(LONGHAUL_CHURN_TIMEOUT_S));
  const std::vector<std::string> lines = churn.lines();
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  ASSERT_TRUE(rc.has_value()) << "longhaul-churn did not finish\n" << out << churn.stderr_text();
  ASSERT_FALSE(lines.empty()) << churn.stderr_text();
  const auto j = nlohmann::json::parse(lines.back(), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(*rc, 0) << out;
  EXPECT_EQ(j["result"], "pass") << out;
  EXPECT_EQ(j["violations"], 0) << out;
  EXPECT_EQ(j["workload"], "train");
  // Churn happened: peers were killed, and replacements joined the running group.
  EXPECT_GE(j["kills"].get<int>(), 1) << out;
  EXPECT_GT(j["joins"].get<int>(), 4) << out;
  // Peers compared their theta_g at many steps.
  EXPECT_GT(j["hash_comparisons"].get<int>(), 1000) << out;
  EXPECT_GE(j["survivors"].get<int>(), 2) << out;
  const double loss = j["val_loss"].get<double>(),
               reference = j["reference_val_loss"].get<double>();
  EXPECT_GT(loss, 0);
  EXPECT_LE(loss / reference, 1.075) << out;
  EXPECT_NEAR(j["val_loss_ratio"].get<double>(), loss / reference, 1e-9);
  // The churn run lost peers for a while; the reference trained as many tokens in fewer steps
  // (to the nearest step of the four peers).
  const double tokens = j["tokens"].get<double>();
  EXPECT_NEAR(j["reference_tokens"].get<double>() / tokens, 1.0, 1e-3) << out;
  EXPECT_LT(j["reference_steps"].get<int64_t>(), std::stoll(LONGHAUL_CHURN_TRAIN_STEPS)) << out;
}

}  // namespace
}  // namespace longhaul::testing
