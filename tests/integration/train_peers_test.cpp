// longhaul-train as peers (issue 20): a real master daemon and longhaul-train processes on
// loopback train a small GPT together. DiLoCo and Streaming DiLoCo end with the same theta_g on
// every peer (engine hash and validation loss), data-parallel training with bit-identical
// parameters, moments and counters; a joiner takes the group's state and ends identical; a peer
// stopped by SIGTERM leaves gracefully while the others go on; a data-parallel group stopped and
// resumed from its checkpoints ends where the uninterrupted run does.
#include <gtest/gtest.h>

#include <signal.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

// Small enough for 100 steps well under a second of compute on one thread.
const std::vector<std::string> kSmallModel = {
    "--layers",  "2", "--channels", "32", "--heads", "2",    "--context",     "32", "--batch", "4",
    "--threads", "1", "--warmup",   "10", "--lr",    "5e-3", "--val-batches", "4"};

class TrainPeersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Sentences from a small grammar (as tests/python/train/test_cli.py): structure the model
    // learns within a few hundred steps.
    std::mt19937 rng(7);
    const char* subjects[] = {"the cat", "a dog", "my friend", "the old man", "every child"};
    const char* verbs[] = {"sees", "likes", "follows", "paints", "remembers"};
    const char* objects[] = {"the river", "a red ball", "the quiet house", "some bread",
                             "the moon"};
    std::ofstream out(corpus_);
    for (int i = 0; i < 6000; ++i)
      out << subjects[rng() % 5] << ' ' << verbs[rng() % 5] << ' ' << objects[rng() % 5] << ".\n";
  }

  std::string out_dir(const std::string& name) const { return cluster_.dir().path() + "/" + name; }

  // A longhaul-train peer named `name` (its --out directory and stderr log are named after it).
  Child& start(const std::string& name, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {LONGHAUL_TRAIN_BIN,
                                     "--master",
                                     cluster_.master_address(),
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--data",
                                     corpus_,
                                     "--out",
                                     out_dir(name),
                                     "--json",
                                     "--no-plot"};
    argv.insert(argv.end(), kSmallModel.begin(), kSmallModel.end());
    argv.insert(argv.end(), args.begin(), args.end());
    peers_.push_back(std::make_unique<Child>(argv, out_dir(name) + ".log"));
    return *peers_.back();
  }

  // Peers 0..n-1 of a group of n, each on its own shard.
  std::vector<Child*> start_group(const std::string& name, int n,
                                  const std::vector<std::string>& args) {
    std::vector<Child*> group;
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> a = {"--peers", std::to_string(n), "--peer-index",
                                    std::to_string(i)};
      a.insert(a.end(), args.begin(), args.end());
      group.push_back(&start(name + std::to_string(i), a));
    }
    return group;
  }

  // The --json line of a peer that exited 0.
  static std::optional<Json> summary(Child& peer) {
    const std::optional<int> rc = peer.wait_exit(120s);
    const std::vector<std::string> lines = peer.lines();
    if (rc != 0 || lines.empty()) {
      ADD_FAILURE() << "exit " << (rc ? std::to_string(*rc) : "timeout") << "\n"
                    << peer.stderr_text();
      return std::nullopt;
    }
    return Json::parse(lines.back(), nullptr, /*allow_exceptions=*/false);
  }

  static std::vector<Json> summaries(const std::vector<Child*>& peers) {
    std::vector<Json> out;
    for (Child* p : peers)
      if (auto s = summary(*p); s && !s->is_discarded()) out.push_back(*s);
    EXPECT_EQ(out.size(), peers.size()) << "a peer did not end with its summary";
    return out;
  }

  // Peers 0..n-1 of a group of n, each resuming from the checkpoints in its own --out directory.
  std::vector<Child*> resume_group(const std::string& name, int n,
                                   const std::vector<std::string>& args) {
    std::vector<Child*> group;
    for (int i = 0; i < n; ++i) {
      const std::string peer = name + std::to_string(i);
      std::vector<std::string> a = {"--peers",         std::to_string(n), "--peer-index",
                                    std::to_string(i), "--resume",        out_dir(peer)};
      a.insert(a.end(), args.begin(), args.end());
      group.push_back(&start(peer, a));
    }
    return group;
  }

  // Waits until the peer's progress line (on stderr) has passed `step`.
  static bool wait_for_step(Child& peer, int step) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline && peer.running()) {
      std::istringstream err(peer.stderr_text());
      for (std::string word; err >> word;)
        if (word == "step" && err >> word && std::isdigit(static_cast<unsigned char>(word[0])) &&
            std::stoi(word) >= step)
          return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  Cluster cluster_;
  const std::string corpus_ = cluster_.dir().path() + "/corpus.txt";
  std::vector<std::unique_ptr<Child>> peers_;
};

// A resumed group ends with the uninterrupted group's state and validation loss.
void expect_as_uninterrupted(const std::vector<Json>& resumed, const std::vector<Json>& straight) {
  ASSERT_EQ(resumed.size(), 2u);
  ASSERT_EQ(straight.size(), 2u);
  for (const Json& j : resumed) {
    EXPECT_EQ(j["state_hash"], straight[0]["state_hash"]);
    EXPECT_EQ(j["final_val_loss"], straight[0]["final_val_loss"]);
  }
}

// Every summary holds the same value at `key`.
void expect_same(const std::vector<Json>& s, const char* key) {
  for (const Json& j : s) EXPECT_EQ(j.at(key), s.at(0).at(key)) << key;
}

std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream fs(line);
    for (std::string f; std::getline(fs, f, ',');) fields.push_back(f);
    rows.push_back(fields);
  }
  return rows;
}

TEST_F(TrainPeersTest, ThreePeersOfDiLoCoEndWithTheSameThetaG) {
  const auto group = start_group("diloco", 3, {"--steps", "100", "--sync-every", "20"});
  const std::vector<Json> s = summaries(group);
  ASSERT_EQ(s.size(), 3u);
  expect_same(s, "state_hash");
  expect_same(s, "final_val_loss");
  for (const Json& j : s) {
    EXPECT_EQ(j["steps"], 100);
    EXPECT_EQ(j["rounds_applied"], 5);
    EXPECT_EQ(j["rounds_dropped"], 0);
    EXPECT_LT(j["final_val_loss"].get<double>(), j["unigram_entropy"].get<double>());
    // A round all-reduces the whole model: at least its bytes each way.
    EXPECT_GE(j["peak_event_bytes"].get<double>(), 2 * 4 * j["params"].get<double>());
    EXPECT_GE(j["bytes_sent"]["data"].get<double>(), 5 * 4 * j["params"].get<double>());
  }
  // One CSV row per step with the peer's columns; validation every 50 steps.
  const auto csv = csv_rows(out_dir("diloco0") + "/log.csv");
  ASSERT_EQ(csv.size(), 101u);
  const std::vector<std::string> header = {"step",         "lr",
                                           "train_loss",   "val_loss",
                                           "grad_norm",    "tokens_per_s",
                                           "elapsed_s",    "world",
                                           "data_sent",    "data_received",
                                           "control_sent", "control_received",
                                           "state_sent",   "state_received",
                                           "blocked_s"};
  EXPECT_EQ(csv[0], header);
  for (size_t i = 1; i < csv.size(); ++i) {
    ASSERT_EQ(csv[i].size(), header.size()) << "row " << i;
    EXPECT_EQ(csv[i][0], std::to_string(i));
    EXPECT_EQ(csv[i][3].empty(), i % 50 != 0) << "validation at step " << i;
  }
}

TEST_F(TrainPeersTest, ThreePeersOfStreamingDiLoCoEndWithTheSameThetaG) {
  const auto group = start_group("streaming", 3,
                                 {"--steps", "100", "--method", "streaming", "--sync-every", "20",
                                  "--fragments", "4", "--delay", "1"});
  const std::vector<Json> s = summaries(group);
  ASSERT_EQ(s.size(), 3u);
  expect_same(s, "state_hash");
  expect_same(s, "final_val_loss");
  for (const Json& j : s) {
    // Fragment f launches at 20k + 5f: 5 + 4 + 4 + 4 rounds, the last settled by the close.
    EXPECT_EQ(j["rounds_applied"], 17);
    EXPECT_EQ(j["sync"]["fragments"], 4);
    // A round carries one fragment, not the whole model.
    EXPECT_LT(j["peak_event_bytes"].get<double>(), 2 * 4 * j["params"].get<double>());
  }
}

// The sparse codec (issue 48): DiLoCo and Streaming DiLoCo peers send top-k encodings through
// the sparse all-gather and end on one theta_g; a round sends far less than the model's f32 bytes.
TEST_F(TrainPeersTest, TwoPeersWithTheSparseCodecEndWithTheSameThetaG) {
  const auto diloco = start_group("sparse", 2,
                                  {"--steps", "60", "--sync-every", "20", "--codec", "sparse",
                                   "--topk-per-chunk", "32", "--chunk", "1024"});
  const std::vector<Json> s = summaries(diloco);
  ASSERT_EQ(s.size(), 2u);
  expect_same(s, "state_hash");
  expect_same(s, "final_val_loss");
  for (const Json& j : s) {
    EXPECT_EQ(j["rounds_applied"], 3);
    EXPECT_EQ(j["rounds_dropped"], 0);
    EXPECT_EQ(j["sync"]["codec"], "sparse");
    EXPECT_EQ(j["sync"]["topk_per_chunk"], 32);
    // 32 of 1024 values at 12 bits each: a round moves about a 70th of the f32 model.
    EXPECT_LT(j["peak_event_bytes"].get<double>(), 0.1 * 4 * j["params"].get<double>());
  }
  const auto streaming =
      start_group("sparse-streaming", 2,
                  {"--steps", "60", "--method", "streaming", "--sync-every", "20", "--fragments",
                   "2", "--delay", "1", "--codec", "sparse"});
  const std::vector<Json> t = summaries(streaming);
  ASSERT_EQ(t.size(), 2u);
  expect_same(t, "state_hash");
  for (const Json& j : t) EXPECT_EQ(j["rounds_applied"], 5);  // 20, 30, 40, 50; 60 by the close
}

TEST_F(TrainPeersTest, ThreePeersOfDataParallelEndBitIdentical) {
  const auto group = start_group("dp", 3, {"--steps", "30", "--method", "dp"});
  const std::vector<Json> s = summaries(group);
  ASSERT_EQ(s.size(), 3u);
  // The hash covers the parameters, both AdamW moments and the counters.
  expect_same(s, "state_hash");
  expect_same(s, "final_val_loss");
  for (const Json& j : s) EXPECT_EQ(j["rounds_applied"], 30);
}

// A peer joining a running group (either kind of method) takes the group's state and step, and
// ends identical to the others.
TEST_F(TrainPeersTest, AJoinerTakesTheGroupsStateAndEndsIdentical) {
  for (const char* method : {"dp", "diloco"}) {
    SCOPED_TRACE(method);
    const std::string name = std::string("join-") + method;
    // Long enough that the group is still training when the joiner has started up.
    std::vector<std::string> args = {"--steps", "1500", "--method", method};
    if (std::string(method) == "diloco") args.insert(args.end(), {"--sync-every", "20"});
    auto group = start_group(name, 3, args);
    ASSERT_TRUE(wait_for_step(*group[0], 30)) << group[0]->stderr_text();
    args.insert(args.end(), {"--peers", "3", "--peer-index", "1", "--join"});
    group.push_back(&start(name + "-joiner", args));
    const std::vector<Json> s = summaries(group);
    ASSERT_EQ(s.size(), 4u);
    expect_same(s, "state_hash");
    expect_same(s, "final_val_loss");
    EXPECT_EQ(s[3]["steps"], 1500);
    EXPECT_EQ(s[3]["world"], 4);
    EXPECT_GT(s[3]["bytes_received"]["state"].get<double>(), 4 * s[3]["params"].get<double>());
  }
}

// SIGTERM: the peer finishes its step, settles with the group, leaves and exits 0 with its
// summary; the others see it gone and go on together.
TEST_F(TrainPeersTest, APeerStoppedBySigtermLeavesAndTheOthersGoOn) {
  const auto group = start_group("sigterm", 3, {"--steps", "600", "--sync-every", "20"});
  ASSERT_TRUE(wait_for_step(*group[2], 60)) << group[2]->stderr_text();
  group[2]->kill(SIGTERM);
  const std::vector<Json> s = summaries(group);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_TRUE(s[2]["stopped"].get<bool>());
  EXPECT_LT(s[2]["steps"].get<int>(), 600);
  EXPECT_TRUE(s[2]["final_val_loss"].is_number());
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(s[i]["stopped"].get<bool>());
    EXPECT_EQ(s[i]["steps"], 600);
    EXPECT_EQ(s[i]["world"], 2);
    EXPECT_EQ(s[i]["state_hash"], s[0]["state_hash"]);
  }
}

// Two peers (the average of two is the same whichever ring order a run forms) stopped at step 20
// and resumed from their checkpoints end bit-identical to an uninterrupted run.
TEST_F(TrainPeersTest, ADataParallelGroupResumedFromItsCheckpointsEndsAsIfUninterrupted) {
  const std::vector<std::string> args = {"--steps", "40", "--method", "dp"};
  const std::vector<Json> straight = summaries(start_group("straight", 2, args));
  std::vector<std::string> stop = args;
  stop.insert(stop.end(), {"--stop-at", "20"});
  const std::vector<Json> halves = summaries(start_group("halves", 2, stop));
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0]["steps"], 20);
  const std::vector<Child*> resumed = resume_group("halves", 2, args);
  expect_as_uninterrupted(summaries(resumed), straight);
  EXPECT_EQ(csv_rows(out_dir("halves0") + "/log.csv").size(), 41u);  // appended, not restarted
}

// The same for DiLoCo, stopped between two syncs (the local parameters are not theta_g there):
// the trainer's checkpoint and the engine's state together resume exactly.
TEST_F(TrainPeersTest, ADiLoCoGroupResumedFromItsCheckpointsEndsAsIfUninterrupted) {
  const std::vector<std::string> args = {"--steps", "60", "--sync-every", "20"};
  const std::vector<Json> straight = summaries(start_group("straight", 2, args));
  std::vector<std::string> stop = args;
  stop.insert(stop.end(), {"--stop-at", "30"});
  ASSERT_EQ(summaries(start_group("halves", 2, stop)).size(), 2u);
  const std::vector<Child*> resumed = resume_group("halves", 2, args);
  expect_as_uninterrupted(summaries(resumed), straight);
}

}  // namespace
}  // namespace longhaul::testing
