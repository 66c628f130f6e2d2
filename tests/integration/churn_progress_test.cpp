// longhaul-churn's progress check can fail (issue 51): groups that train nothing, with real
// processes, must end in a progress violation, while their state hashes agree everywhere (the
// checks on hashes alone pass such a group: once, rounds were dropped as "misaligned" for 8,000
// steps while the tool reported 0 violations).
//  - longhaul-peer daemons with --fault-drop-updates (a test hook: every step's all-reduces and
//    sync run, but nobody applies the averaged update) step on, and the group applies no round:
//    a violation once the derived bound (--hang-ms + 4 round intervals) has passed.
//  - longhaul-train peers whose DiLoCo rounds come every 1,000,000 steps (sync effectively off)
//    train their own copies; theta_g never moves, and its validation loss does not fall.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "churn_support.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Outcome {
  std::optional<int> rc;
  std::string out;
  nlohmann::json summary;
  double seconds = 0;
};

Outcome run_churn(const std::vector<std::string>& argv, const std::string& err_path) {
  Child churn(argv, err_path);
  StopOnExit stop{churn};
  const auto t0 = Clock::now();
  Outcome o;
  o.rc = churn.wait_exit(100s);
  o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::vector<std::string> lines = churn.lines();
  o.out = joined_lines(lines) + churn.stderr_text();
  o.summary = summary_of(lines);
  return o;
}

// The run finished and failed with one violation, the progress check's.
void expect_only_the_progress_violation(const Outcome& o) {
  ASSERT_TRUE(o.rc.has_value()) << "longhaul-churn did not finish\n" << o.out;
  ASSERT_TRUE(o.summary.is_object()) << o.out;
  EXPECT_EQ(*o.rc, 1) << o.out;
  EXPECT_EQ(o.summary["result"], "fail") << o.out;
  EXPECT_EQ(o.summary["progress_violations"], 1) << o.out;
  EXPECT_EQ(o.summary["violations"], 1) << o.out;
}

TEST(ChurnProgress, PeersThatApplyNoUpdateAreAViolationThoughTheirHashesAgree) {
  TempDir dir;
  // No churn: nothing but the fault can stall the rounds.
  const Outcome o =
      run_churn({LONGHAUL_CHURN_BIN, "--peers", "3", "--duration", "60", "--kill-interval-ms", "0",
                 "--seed", "1", "--peer-arg=--fault-drop-updates", "--json"},
                dir.path() + "/churn.err");
  ASSERT_NO_FATAL_FAILURE(expect_only_the_progress_violation(o));
  const auto& j = o.summary;
  EXPECT_NE(o.out.find("VIOLATION"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("the group applied no round for"), std::string::npos) << o.out;
  // The group stepped, and its members agreed on every hash.
  EXPECT_GT(j["steps"].get<int64_t>(), 20) << o.out;
  EXPECT_GT(j["hash_comparisons"].get<int64_t>(), 20) << o.out;
  EXPECT_EQ(j["rounds_applied"], 0) << o.out;
  EXPECT_GT(j["longest_no_round_s"].get<double>(), j["progress_bound_s"].get<double>()) << o.out;
  // The bound derived from --hang-ms (15 s) and the rounds' spacing, and the run stopped at the
  // violation, long before --duration.
  EXPECT_GE(j["progress_bound_s"].get<double>(), 15.0) << o.out;
  EXPECT_LT(j["progress_bound_s"].get<double>(), 20.0) << o.out;
  EXPECT_LT(o.seconds, 50) << o.out;
}

TEST(ChurnProgress, TrainersWhoseRoundsNeverComeAreAViolationOfTheLossRule) {
  TempDir dir;
  std::vector<std::string> argv = {LONGHAUL_CHURN_BIN,
                                   "--workload",
                                   "train",
                                   "--peers",
                                   "2",
                                   "--duration",
                                   "60",
                                   "--train-steps",
                                   "1000",
                                   "--kill-interval-ms",
                                   "0",
                                   "--seed",
                                   "1",
                                   "--train-arg=--sync-every=1000000",
                                   "--json"};
  const std::vector<std::string> data = docs_data_args(LONGHAUL_DOCS_DIR);
  ASSERT_GE(data.size(), 5u) << "no documentation in " << LONGHAUL_DOCS_DIR;
  argv.insert(argv.end(), data.begin(), data.end());
  const Outcome o = run_churn(argv, dir.path() + "/churn.err");
  ASSERT_NO_FATAL_FAILURE(expect_only_the_progress_violation(o));
  const auto& j = o.summary;
  EXPECT_NE(o.out.find("the validation loss of theta_g did not fall"), std::string::npos) << o.out;
  // theta_g never moved: every evaluation gave the same loss, and no round was applied; the
  // survivors agree (their theta_g is the initial one), and no reference run was needed.
  EXPECT_EQ(j["rounds_applied"], 0) << o.out;
  EXPECT_EQ(j["round_every_steps"], 1000000) << o.out;
  EXPECT_EQ(j["val_evaluations"], 19) << o.out;  // steps 50 .. 950
  EXPECT_EQ(j["val_loss_drop"].get<double>(), 0.0) << o.out;
  EXPECT_EQ(j["survivors"], 2) << o.out;
  EXPECT_TRUE(j["reference_val_loss"].is_null()) << o.out;
}

}  // namespace
}  // namespace longhaul::testing
