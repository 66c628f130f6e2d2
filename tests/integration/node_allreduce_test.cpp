// Node-local groups with real processes (issue 29): nodes of L = 2, 3 and 4 ranks of
// node_allreduce_peer run hierarchical all-reduces (lh_node_allreduce: shared memory inside the
// node, one ring per rail between the nodes) through a real master, every result checked exactly
// and identical on every rank; a rank SIGKILLed inside a run gets its node evicted at once (its
// sibling never hangs in the local group), and the other nodes retry and go on without it.
#include <signal.h>

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <regex>
#include <set>

#include "cluster.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kHeartbeat = 300ms;
constexpr int kMisses = 3;

struct Step {
  int step = 0;
  int64_t world = 0;
  int64_t c = 0;
  std::string hash;
};

std::optional<Step> parse_step(const std::string& line) {
  static const std::regex re(R"(^STEP step=(\d+) world=(\d+) c=(\d+) hash=([0-9a-f]+))");
  std::smatch m;
  if (!std::regex_search(line, m, re)) return std::nullopt;
  return Step{std::stoi(m[1]), std::stoll(m[2]), std::stoll(m[3]), m[4]};
}

// C of node_allreduce_peer's results for the nodes numbered `nodes`, L ranks each.
int64_t expected_c(const std::set<int>& nodes, int ranks) {
  int64_t sum = 0;
  for (int k : nodes) sum += k + 1;
  return sum * ranks * (ranks + 1) / 2;
}

class NodeRun {
 public:
  NodeRun()
      : cluster_({"--heartbeat-interval-ms", std::to_string(kHeartbeat.count()),
                  "--heartbeat-misses", std::to_string(kMisses)}) {}

  Child& start(int node, uint32_t rail, uint32_t rails, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {LONGHAUL_NODE_PEER_BIN,
                                     "--master",
                                     cluster_.master_address(),
                                     "--node",
                                     "n" + std::to_string(node),
                                     "--node-number",
                                     std::to_string(node),
                                     "--rail",
                                     std::to_string(rail),
                                     "--rails",
                                     std::to_string(rails),
                                     "--wait-world",
                                     "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const std::string log = cluster_.dir().path() + "/n" + std::to_string(node) + "-rank" +
                            std::to_string(rail) + ".log";
    children_.push_back(std::make_unique<Child>(argv, log));
    return *children_.back();
  }
  Cluster& cluster() { return cluster_; }

 private:
  Cluster cluster_;
  std::vector<std::unique_ptr<Child>> children_;
};

// Waits until `rank` reports step `step` (from line `from` on); the step, or the failure.
::testing::AssertionResult reaches(Child& rank, int step, Step* out, size_t from = 0,
                                   std::chrono::milliseconds timeout = 90s) {
  auto line = rank.wait_line(
      [step](const std::string& l) {
        auto s = parse_step(l);
        return (s && s->step >= step) || l.rfind("ERROR", 0) == 0 || l.rfind("MISMATCH", 0) == 0;
      },
      timeout, from);
  if (line)
    if (auto s = parse_step(*line)) {
      *out = *s;
      return ::testing::AssertionSuccess();
    }
  return ::testing::AssertionFailure() << "pid " << rank.pid() << " did not reach step " << step
                                       << ": " << (line ? *line : "timeout") << "\n"
                                       << rank.stderr_text();
}

// Every rank's lines for `step` (from line `from` on) carry the same hash and the expected C.
::testing::AssertionResult steps_agree(const std::vector<Child*>& ranks, int first_step,
                                       int last_step, int64_t world, int64_t c,
                                       const std::vector<size_t>& from) {
  std::map<int, std::set<std::string>> hashes;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto lines = ranks[r]->lines();
    for (size_t i = from.empty() ? 0 : from[r]; i < lines.size(); ++i) {
      auto s = parse_step(lines[i]);
      if (!s || s->step < first_step || s->step > last_step) continue;
      if (s->world != world || s->c != c)
        return ::testing::AssertionFailure() << "rank " << r << ": " << lines[i] << " (want world "
                                             << world << ", c " << c << ")";
      hashes[s->step].insert(s->hash);
    }
  }
  for (int step = first_step; step <= last_step; ++step)
    if (hashes[step].size() != 1)
      return ::testing::AssertionFailure()
             << "step " << step << ": " << hashes[step].size() << " different results";
  return ::testing::AssertionSuccess();
}

void two_nodes_reduce(int ranks, std::vector<std::string> extra = {}) {
  NodeRun run;
  ASSERT_NE(run.cluster().port(), 0);
  std::vector<Child*> all;
  for (int node = 0; node < 2; ++node)
    for (int r = 0; r < ranks; ++r) {
      auto args = extra;
      args.insert(args.end(), {"--steps", "4"});
      all.push_back(&run.start(node, static_cast<uint32_t>(r), static_cast<uint32_t>(ranks), args));
    }
  for (Child* rank : all) {
    Step s;
    ASSERT_TRUE(reaches(*rank, 3, &s));
  }
  EXPECT_TRUE(steps_agree(all, 0, 3, 2, expected_c({0, 1}, ranks), {}));
  for (Child* rank : all) EXPECT_EQ(rank->wait_exit(30s), 0) << rank->stderr_text();
}

TEST(NodeLocalGroups, TwoNodesOfTwoRanksReduceExactlyAndAlike) {
  two_nodes_reduce(2);
}

TEST(NodeLocalGroups, TwoNodesOfThreeRanksAverage) {
  two_nodes_reduce(3, {"--avg", "1"});
}

TEST(NodeLocalGroups, TwoNodesOfFourRanksReduceExactlyAndAlike) {
  two_nodes_reduce(4);
}

// Three elements over four ranks: rank 3's chunk is empty, and it sends nothing on its rail.
TEST(NodeLocalGroups, FewerElementsThanRanks) {
  two_nodes_reduce(4, {"--count", "3"});
}

TEST(NodeLocalGroups, ARankKilledMidRunEvictsItsNodeAtOnceAndTheOtherNodesRetry) {
  constexpr int kNodes = 3, kRanks = 2;
  NodeRun run;
  ASSERT_NE(run.cluster().port(), 0);
  std::vector<std::vector<Child*>> ranks(kNodes);
  for (int n = 0; n < kNodes; ++n)
    for (int r = 0; r < kRanks; ++r)
      ranks[n].push_back(
          &run.start(n, static_cast<uint32_t>(r), kRanks,
                     {"--count", "1000003", "--step-delay-ms", "10", "--wait-world", "3"}));
  for (auto& node : ranks)
    for (Child* rank : node) {
      Step s;
      ASSERT_TRUE(reaches(*rank, 2, &s));
    }

  std::vector<Child*> survivors;
  std::vector<size_t> from;
  for (int n : {0, 2})
    for (Child* rank : ranks[n]) {
      survivors.push_back(rank);
      from.push_back(rank->lines().size());
    }
  const auto killed_at = Clock::now();
  ranks[1][0]->kill(SIGKILL);
  // The sibling learns it from its local group (the pidfd) or from the master, whichever first,
  // and never waits for the dead rank.
  EXPECT_EQ(ranks[1][1]->wait_exit(20s), 4) << ranks[1][1]->stderr_text();
  const auto took = Clock::now() - killed_at;
  EXPECT_LT(took, kHeartbeat * kMisses + 1s);
  EXPECT_NE(ranks[1][1]->last_line("ERROR").find("LH_ERR_NODE_EVICTED"), std::string::npos)
      << ranks[1][1]->last_line("ERROR");
  std::cout << "sibling ended "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after the kill: " << ranks[1][1]->last_line("ERROR") << "\n";

  // The two other nodes go on, with both their ranks, on two nodes, exactly and alike.
  int last = 0;
  for (size_t i = 0; i < survivors.size(); ++i) {
    Step s;
    ASSERT_TRUE(reaches(*survivors[i], 0, &s, from[i]));
    auto line = survivors[i]->wait_line(
        [](const std::string& l) {
          auto st = parse_step(l);
          return (st && st->world == 2) || l.rfind("ERROR", 0) == 0 || l.rfind("MISMATCH", 0) == 0;
        },
        60s, from[i]);
    ASSERT_TRUE(line && parse_step(*line)) << (line ? *line : "timeout");
    last = std::max(last, parse_step(*line)->step);
  }
  for (Child* rank : survivors) {
    Step s;
    ASSERT_TRUE(reaches(*rank, last + 2, &s));
    EXPECT_TRUE(rank->last_line("ERROR").empty()) << rank->last_line("ERROR");
  }
  EXPECT_TRUE(steps_agree(survivors, last, last + 2, 2, expected_c({0, 2}, kRanks), from));
}

}  // namespace
}  // namespace longhaul::testing
