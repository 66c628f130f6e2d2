// The sync engine end to end (issue 19): a real master daemon and sync_peer processes on
// loopback train the RegressionTask together. DiLoCo and Streaming DiLoCo end bit-identical on
// every peer and equal to a single-process simulation of the same algorithm; a peer SIGKILLed
// mid-sync leaves the survivors bit-identical; a joiner downloads the global parameters and
// counts from its first whole round; a peer sending NaN is excluded and named; bad input fails
// with a clear error.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cluster.hpp"
#include "collective/partition.hpp"
#include "longhaul/longhaul.hpp"
#include "sync/outer_rules.hpp"
#include "sync_objective.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kDim = 64, kRanges = 4;

struct Training {
  uint32_t peers = 3;
  uint64_t steps = 200;
  uint32_t sync_every = 20, fragments = 1, delay = 0;
  std::vector<std::string> extra;  // more sync_peer flags for every peer
};

std::vector<std::string> peer_args(const Cluster& c, const Training& r, uint32_t index) {
  std::vector<std::string> a = {
      LONGHAUL_SYNC_PEER_BIN,      "--master",     c.master_address(),           "--index",
      std::to_string(index),       "--peers",      std::to_string(r.peers),      "--steps",
      std::to_string(r.steps),     "--dim",        std::to_string(kDim),         "--ranges",
      std::to_string(kRanges),     "--sync-every", std::to_string(r.sync_every), "--fragments",
      std::to_string(r.fragments), "--delay",      std::to_string(r.delay)};
  a.insert(a.end(), r.extra.begin(), r.extra.end());
  return a;
}

// What a peer printed at the end: its final line and its global parameters, as bits.
struct Final {
  std::string hash;
  uint64_t applied = 0, dropped = 0, retries = 0, memory = 0, late = 0, peak = 0;
  uint64_t data_sent = 0, data_received = 0, control_sent = 0, control_received = 0;
  uint64_t state_sent = 0, state_received = 0;
  std::vector<std::vector<uint32_t>> global;  // by fragment
  int64_t rank = -1;
};

std::optional<Final> final_of(Child& peer) {
  if (!peer.wait_exit(120s)) return std::nullopt;
  Final f;
  for (const auto& line : peer.lines()) {
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "final") {
      std::string k;
      uint64_t step;
      in >> k >> step >> k >> f.hash >> k >> f.applied >> k >> f.dropped >> k >> f.retries >> k >>
          f.memory >> k >> f.late >> k >> f.peak >> k >> f.data_sent >> f.data_received >> k >>
          f.control_sent >> f.control_received >> k >> f.state_sent >> f.state_received;
    } else if (word == "global") {
      uint32_t fragment;
      in >> fragment;
      f.global.resize(std::max<size_t>(f.global.size(), fragment + 1));
      for (std::string hex; in >> hex;)
        f.global[fragment].push_back(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
    } else if (word == "started") {
      std::string k;
      uint64_t step;
      in >> k >> step >> k >> f.rank;
    }
  }
  if (f.hash.empty()) return std::nullopt;
  return f;
}

// The all-reduce's sum as the ring computes it: chunk c is combined along the ring from the
// member at ring position c.
std::vector<float> ring_sum(const std::vector<std::vector<float>>& by_rank) {
  const size_t n = by_rank.size(), count = by_rank[0].size();
  const collective::Partition part(count, n, count);
  std::vector<float> out(count);
  for (size_t c = 0; c < n; ++c) {
    const collective::Range chunk = part.chunk(c);
    for (size_t i = chunk.begin; i < chunk.begin + chunk.count; ++i) {
      float acc = by_rank[c][i];
      for (size_t k = 1; k < n; ++k) acc = by_rank[(c + k) % n][i] + acc;
      out[i] = acc;
    }
  }
  return out;
}

// DiLoCo / Streaming DiLoCo in one process, with the engine's schedule, every peer full from the
// start, mix 0, no codec: the global parameters every peer must end with.
std::vector<std::vector<float>> simulate(const Training& r,
                                         const std::vector<uint32_t>& index_by_rank) {
  const size_t n = index_by_rank.size(), per_range = kDim / kRanges;
  std::vector<RegressionTask> tasks;
  for (uint32_t idx : index_by_rank) tasks.emplace_back(kDim, idx);
  std::vector<std::vector<float>> w(n, RegressionTask::initial(kDim));
  // Fragment f: ranges f, f + F, ... in order.
  auto fragment_elems = [&](uint32_t f) {
    std::vector<size_t> e;
    for (uint32_t rg = f; rg < kRanges; rg += r.fragments)
      for (size_t j = 0; j < per_range; ++j) e.push_back(rg * per_range + j);
    return e;
  };
  std::vector<std::vector<float>> theta(r.fragments), buffer(r.fragments);
  std::vector<bool> started(r.fragments, false);
  for (uint32_t f = 0; f < r.fragments; ++f)
    for (size_t i : fragment_elems(f)) theta[f].push_back(w[0][i]), buffer[f].push_back(0.0f);
  std::map<uint32_t, std::vector<std::vector<float>>> pending;  // fragment -> Δ by rank
  const sync::NesterovParams params;
  auto apply = [&](uint32_t f) {
    std::vector<float> avg = ring_sum(pending[f]);
    if (n > 1)
      for (float& x : avg) x /= static_cast<float>(n);
    sync::nesterov_step(theta[f], buffer[f], avg, params, !started[f]);
    started[f] = true;
    const auto elems = fragment_elems(f);
    for (size_t m = 0; m < n; ++m)
      for (size_t k = 0; k < elems.size(); ++k) w[m][elems[k]] = theta[f][k];
    pending.erase(f);
  };
  const uint32_t spacing = r.sync_every / r.fragments;
  for (uint64_t t = 1; t <= r.steps; ++t) {
    for (size_t m = 0; m < n; ++m) tasks[m].step(w[m], t, 0.05f);
    for (uint32_t f = 0; f < r.fragments; ++f)
      if (r.delay > 0 && pending.count(f) && t >= r.delay &&
          (t - r.delay) >= r.sync_every + f * spacing &&
          (t - r.delay - f * spacing) % r.sync_every == 0)
        apply(f);
    for (uint32_t f = 0; f < r.fragments; ++f) {
      if (t < r.sync_every + f * spacing || (t - f * spacing) % r.sync_every != 0) continue;
      const auto elems = fragment_elems(f);
      std::vector<std::vector<float>> deltas(n);
      for (size_t m = 0; m < n; ++m)
        for (size_t k = 0; k < elems.size(); ++k) deltas[m].push_back(theta[f][k] - w[m][elems[k]]);
      pending[f] = deltas;
      if (r.delay == 0) apply(f);
    }
  }
  for (uint32_t f = 0; f < r.fragments; ++f)
    if (pending.count(f)) apply(f);  // close() settles the round in flight
  return theta;
}

// Every peer's Final; a peer that did not end well is a test failure (and is left out).
std::vector<Final> finals_of(const std::vector<Child*>& peers) {
  std::vector<Final> out;
  for (Child* p : peers) {
    auto f = final_of(*p);
    if (f)
      out.push_back(*f);
    else
      ADD_FAILURE() << p->stderr_text() << p->last_line("error");
  }
  return out;
}

class SyncEngineTest : public ::testing::Test {
 protected:
  Child& start(const Training& r, uint32_t index, std::vector<std::string> more = {}) {
    auto args = peer_args(cluster_, r, index);
    args.insert(args.end(), more.begin(), more.end());
    peers_.push_back(std::make_unique<Child>(
        args, cluster_.dir().path() + "/sync_peer" + std::to_string(peers_.size()) + ".log"));
    return *peers_.back();
  }
  std::string why(Child& peer) { return peer.stderr_text() + "\n" + peer.last_line("error"); }
  // Every peer of `r`, the last one taking `step_ms` a step from step 25 on.
  std::vector<Child*> start_with_a_slow_last(const Training& r, uint32_t step_ms) {
    std::vector<Child*> peers;
    for (uint32_t i = 0; i + 1 < r.peers; ++i) peers.push_back(&start(r, i));
    peers.push_back(
        &start(r, r.peers - 1, {"--step-ms", std::to_string(step_ms), "--slow-after", "25"}));
    return peers;
  }

  Cluster cluster_;
  std::vector<std::unique_ptr<Child>> peers_;
};

void expect_equal_to_simulation(const Training& run, std::vector<Child*> peers) {
  const std::vector<Final> finals = finals_of(peers);
  ASSERT_EQ(finals.size(), peers.size());
  // Every launch is applied (the last round settled by close()).
  uint64_t rounds = 0;
  const uint32_t spacing = run.sync_every / run.fragments;
  for (uint32_t f = 0; f < run.fragments; ++f)
    for (uint64_t at = run.sync_every + f * spacing; at <= run.steps; at += run.sync_every)
      ++rounds;
  for (const auto& f : finals) {
    EXPECT_EQ(f.hash, finals[0].hash);
    EXPECT_EQ(f.global, finals[0].global);
    EXPECT_EQ(f.applied, rounds);
    EXPECT_EQ(f.dropped, 0u);
    // The bound of docs/training.md: θ_g and the momentum (fp32, every parameter), the counters
    // and the configuration tag, one staging buffer of the largest fragment.
    const uint64_t largest = kDim / kRanges * ((kRanges + run.fragments - 1) / run.fragments);
    EXPECT_EQ(f.memory, 2 * 4 * kDim + 8 * (1 + run.fragments) + 1 + 4 * largest);
    // Counted at the sockets: every round moves the fragment's pseudo-gradient at least once
    // each way, and settling talks to the master.
    EXPECT_GE(f.peak, 2 * 4 * (kDim / kRanges) * ((kRanges + run.fragments - 1) / run.fragments));
    EXPECT_GE(f.data_sent, rounds * 4 * (kDim / kRanges));
    EXPECT_GT(f.control_sent, 0u);
    EXPECT_GT(f.control_received, 0u);
  }
  std::vector<uint32_t> index_by_rank(peers.size());
  for (uint32_t i = 0; i < peers.size(); ++i) index_by_rank[finals[i].rank] = i;
  const auto sim = simulate(run, index_by_rank);
  ASSERT_EQ(sim.size(), finals[0].global.size());
  for (size_t f = 0; f < sim.size(); ++f) {
    std::vector<uint32_t> bits(sim[f].size());
    std::memcpy(bits.data(), sim[f].data(), bits.size() * 4);
    EXPECT_EQ(finals[0].global[f], bits) << "fragment " << f << " differs from the simulation";
  }
}

TEST_F(SyncEngineTest, ThreePeersOfDiLoCoEndBitIdenticalAndEqualToTheSimulation) {
  const Training run{3, 200, 20, 1, 0, {}};
  std::vector<Child*> peers;
  for (uint32_t i = 0; i < run.peers; ++i) peers.push_back(&start(run, i));
  expect_equal_to_simulation(run, peers);
}

TEST_F(SyncEngineTest, ThreePeersOfStreamingDiLoCoEndBitIdenticalAndEqualToTheSimulation) {
  const Training run{3, 200, 20, 4, 1, {}};
  std::vector<Child*> peers;
  for (uint32_t i = 0; i < run.peers; ++i) peers.push_back(&start(run, i));
  expect_equal_to_simulation(run, peers);
}

// Parses "round F K applied A participants P attempts N excluded IDS" lines.
struct RoundLine {
  uint32_t fragment = 0;
  uint64_t round = 0;
  int applied = 0;
  uint32_t participants = 0, attempts = 0;
  std::string excluded;
};

std::vector<RoundLine> rounds_of(Child& peer) {
  std::vector<RoundLine> out;
  for (const auto& line : peer.lines()) {
    if (line.rfind("round ", 0) != 0) continue;
    std::istringstream in(line);
    RoundLine r;
    std::string k;
    in >> k >> r.fragment >> r.round >> k >> r.applied >> k >> r.participants >> k >> r.attempts >>
        k >> r.excluded;
    out.push_back(r);
  }
  return out;
}

uint64_t id_of(Child& peer) {
  auto line =
      peer.wait_line([](const std::string& l) { return l.rfind("ready id ", 0) == 0; }, 60s);
  return line ? std::stoull(line->substr(9)) : 0;
}

// CO2 and eager overlap each round's all-reduce with the whole next round: three peers end with
// the same global state, every round applied one round late, within the memory bound.
TEST_F(SyncEngineTest, CO2AndEagerEndBitIdenticalWithinTheirMemoryBound) {
  for (const char* method : {"co2", "eager"}) {
    SCOPED_TRACE(method);
    peers_.clear();
    const Training run{3, 120, 20, 1, 0, {"--method", method, "--verify-every", "2"}};
    std::vector<Child*> peers;
    for (uint32_t i = 0; i < run.peers; ++i) peers.push_back(&start(run, i));
    const std::vector<Final> finals = finals_of(peers);
    ASSERT_EQ(finals.size(), peers.size());
    const bool eager = std::string(method) == "eager";
    for (const auto& f : finals) {
      EXPECT_EQ(f.hash, finals[0].hash);
      EXPECT_EQ(f.global, finals[0].global);
      EXPECT_EQ(f.applied, run.steps / run.sync_every);  // the last one settled by close()
      EXPECT_EQ(f.memory, 2 * 4 * kDim + 8 * 2 + 1 + 4 * kDim + (eager ? 4 * kDim : 0));
    }
  }
}

// A round not done in time (one member trains much slower) is dropped on every peer that settles
// it, counted as late where the deadline passed. The failed round ends the epoch: the on-time
// peers re-form once the slow one has reached the round too, so all three enter the next epoch
// from the same round (none runs a round ahead of another) and end with one θ_g.
TEST_F(SyncEngineTest, RoundsPastTheirDeadlineAreDroppedEverywhereAndCounted) {
  const Training run{3, 60, 10, 1, 0, {"--deadline-ms", "100"}};
  const std::vector<Child*> peers = start_with_a_slow_last(run, 60);
  const std::vector<Final> finals = finals_of(peers);
  ASSERT_EQ(finals.size(), peers.size());
  EXPECT_EQ(finals[0].hash, finals[1].hash);
  EXPECT_EQ(finals[2].hash, finals[0].hash);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(finals[i].applied, 2u);  // the rounds before the slowdown
    EXPECT_EQ(finals[i].dropped, run.steps / run.sync_every - 2);
    EXPECT_LE(finals[i].late, finals[i].dropped);
  }
  // Late counts where the deadline passed. The two on-time peers launch the first late round
  // within a millisecond of each other; the first whose deadline passes aborts the round, which
  // can fail the other's before its own deadline: that one drops it without counting it late.
  // Every later round is dropped too: the slow member misses each deadline.
  EXPECT_GE(finals[0].late + finals[1].late, 1u);
  // The first late round is dropped by the slow peer too: nobody applied a round another dropped.
  const auto slow = rounds_of(*peers[2]);
  ASSERT_GE(slow.size(), 3u);
  EXPECT_EQ(slow[2].applied, 0);
}

// A member the group waits for round after round (from step 25 it trains 400 ms a step, the
// others' deadline is 200 ms): each round fails at the others' deadline seconds before it starts
// its part. The master evicts it after three such rounds in a row (its default
// evict_after_missed), with the reason, and the other two apply every later round without it and
// end with one θ_g (docs/protocol.md, "Members the group waits for").
TEST_F(SyncEngineTest, AMemberTheGroupWaitsForRoundAfterRoundIsEvictedAndTheOthersGoOn) {
  const Training run{3, 150, 10, 1, 0, {"--deadline-ms", "200"}};
  const std::vector<Child*> peers = start_with_a_slow_last(run, 400);
  const std::vector<Final> finals = finals_of({peers[0], peers[1]});
  ASSERT_EQ(finals.size(), 2u);
  EXPECT_EQ(finals[0].hash, finals[1].hash);
  const uint64_t rounds = run.steps / run.sync_every;
  for (const Final& f : finals) {
    EXPECT_EQ(f.applied + f.dropped, rounds);
    // Rounds 30 and 40 are dropped (the slow member came to the re-formation); round 50 too, or
    // it is retried over the two once the eviction re-formed the ring without the slow member.
    EXPECT_GE(f.dropped, 2u);
    EXPECT_LE(f.dropped, 3u);
  }
  const auto slow_exit = peers[2]->wait_exit(60s);
  ASSERT_TRUE(slow_exit.has_value());
  EXPECT_NE(*slow_exit, 0);
  EXPECT_NE(why(*peers[2]).find("waited for it in 3 rounds in a row"), std::string::npos)
      << why(*peers[2]);
}

// Streaming DiLoCo, τ = 1: a peer SIGKILLed right after a launch, its round still travelling. The
// round fails on every survivor, is retried over the two of them, and they end bit-identical.
TEST_F(SyncEngineTest, APeerKilledMidSyncLeavesTheSurvivorsBitIdentical) {
  const Training run{3, 200, 20, 4, 1, {"--step-ms", "2"}};
  std::vector<Child*> peers;
  for (uint32_t i = 0; i < run.peers; ++i) peers.push_back(&start(run, i));
  // Fragment 1 launches at 45 and is applied at 46.
  ASSERT_TRUE(peers[2]->wait_line([](const std::string& l) { return l == "step 45"; }, 120s))
      << why(*peers[2]);
  peers[2]->kill(SIGKILL);
  const std::vector<Final> finals = finals_of({peers[0], peers[1]});
  ASSERT_EQ(finals.size(), 2u);
  EXPECT_EQ(finals[0].hash, finals[1].hash);
  EXPECT_EQ(finals[0].global, finals[1].global);
  EXPECT_GE(finals[0].retries + finals[0].dropped, 1u) << "no round saw the peer die";
  // After the death every round counts both survivors.
  const auto rounds = rounds_of(*peers[0]);
  ASSERT_FALSE(rounds.empty());
  EXPECT_EQ(rounds.back().participants, 2u);
  EXPECT_EQ(rounds.back().applied, 1);
}

// The master SIGKILLed and restarted (without a journal) twice mid-training (issue 27): the
// trainers never stop, a round a restart catches is dropped or retried by every peer alike, and
// every peer ends with bit-identical global parameters.
TEST_F(SyncEngineTest, MasterRestartTwiceMidTrainingLeavesEveryPeerBitIdentical) {
  const Training run{3, 300, 10, 1, 0, {"--step-ms", "5"}};
  std::vector<Child*> peers;
  for (uint32_t i = 0; i < run.peers; ++i) peers.push_back(&start(run, i));
  for (const char* at : {"step 80", "step 180"}) {
    ASSERT_TRUE(peers[0]->wait_line([at](const std::string& l) { return l == at; }, 120s))
        << why(*peers[0]);
    ASSERT_TRUE(cluster_.restart_master());
  }
  const std::vector<Final> finals = finals_of(peers);
  ASSERT_EQ(finals.size(), run.peers);
  for (const auto& f : finals) {
    EXPECT_EQ(f.hash, finals[0].hash);
    EXPECT_EQ(f.global, finals[0].global);
  }
  // Training went on in rounds of all three after the second restart.
  const auto rounds = rounds_of(*peers[0]);
  ASSERT_FALSE(rounds.empty());
  EXPECT_EQ(rounds.back().participants, 3u);
  EXPECT_EQ(rounds.back().applied, 1);
  EXPECT_NE(cluster_.master().stderr_text().find("recovery done: 3 of 3"), std::string::npos)
      << cluster_.master().stderr_text();
}

// A peer joining mid-run downloads the global parameters, the outer state and the counters, takes
// part in the rounds at once without counting, and counts from its first whole round.
TEST_F(SyncEngineTest, AJoinerReceivesTheGlobalStateAndItsNextContributionCounts) {
  const Training run{3, 160, 20, 1, 0, {"--step-ms", "10"}};
  std::vector<Child*> peers;
  for (uint32_t i = 0; i < run.peers; ++i) peers.push_back(&start(run, i));
  ASSERT_TRUE(peers[0]->wait_line([](const std::string& l) { return l == "step 30"; }, 120s))
      << why(*peers[0]);
  Child& joiner = start(run, 3, {"--join"});
  peers.push_back(&joiner);
  auto started =
      joiner.wait_line([](const std::string& l) { return l.rfind("started ", 0) == 0; }, 120s);
  ASSERT_TRUE(started) << why(joiner);
  std::istringstream in(*started);
  std::string k;
  uint64_t at = 0;
  in >> k >> k >> at;
  EXPECT_EQ(at % run.sync_every, 0u) << "admitted between admission points: " << *started;
  EXPECT_GT(at, 30u);
  const std::vector<Final> finals = finals_of(peers);
  ASSERT_EQ(finals.size(), peers.size());
  for (const auto& f : finals) EXPECT_EQ(f.hash, finals[0].hash);
  // The joiner downloaded the global parameters and momentum (2 × 64 floats at least) through
  // the state sync's links.
  EXPECT_GE(finals[3].state_received, 2 * 4 * kDim);
  // The round launched where the joiner was admitted counts the three others (the joiner takes
  // part with nothing to give); from its first whole round on, all four.
  bool saw_admission_round = false, saw_next = false;
  for (const auto& r : rounds_of(*peers[0])) {
    if (r.round * run.sync_every == at) {
      EXPECT_EQ(r.participants, 3u);
      saw_admission_round = true;
    } else if (r.round * run.sync_every > at) {
      EXPECT_EQ(r.participants, 4u) << "round " << r.round;
      saw_next = true;
    }
  }
  EXPECT_TRUE(saw_admission_round && saw_next);
}

// A peer whose parameters turn NaN is excluded from the mean and named by everyone; the group's
// global parameters stay finite and identical, and the peer recovers from them.
TEST_F(SyncEngineTest, APeerSendingNaNIsExcludedAndNamed) {
  const Training run{3, 100, 20, 1, 0, {}};
  std::vector<Child*> peers;
  for (uint32_t i = 0; i < run.peers; ++i)
    peers.push_back(&start(
        run, i,
        i == 1 ? std::vector<std::string>{"--nan-at-step", "33"} : std::vector<std::string>{}));
  const uint64_t bad_id = id_of(*peers[1]);
  ASSERT_NE(bad_id, 0u);
  const std::vector<Final> finals = finals_of(peers);
  ASSERT_EQ(finals.size(), peers.size());
  for (const auto& f : finals) EXPECT_EQ(f.hash, finals[0].hash);
  for (Child* p : peers) {
    bool named = false;
    for (const auto& r : rounds_of(*p))
      if (r.round == 2) {  // launched at step 40, after the NaN of step 33
        EXPECT_EQ(r.participants, 2u);
        EXPECT_EQ(r.excluded, std::to_string(bad_id));
        named = true;
      } else {
        EXPECT_EQ(r.participants, 3u) << "round " << r.round;
      }
    EXPECT_TRUE(named);
  }
  for (const auto& fragment : finals[0].global)
    for (uint32_t bits : fragment) ASSERT_NE(bits & 0x7F800000u, 0x7F800000u) << "non-finite θ_g";
}

// Options the engine cannot run are refused before anything is sent; after close, step is an
// error, not a crash.
TEST_F(SyncEngineTest, BadInputGivesAClearErrorAndStepAfterCloseIsRefused) {
  lh_comm_options co;
  lh_comm_options_init(&co);
  const std::string master = cluster_.master_address();
  co.master_address = master.c_str();
  co.listen_address = "127.0.0.1:0";
  lh_comm* comm = nullptr;
  ASSERT_EQ(lh_comm_create(&co, &comm), LH_OK);
  std::vector<float> w(64), v(64);
  lh_param_range ranges[] = {{w.data(), 64, LH_DTYPE_F32}, {v.data(), 64, LH_DTYPE_F32}};
  lh_sync_engine_options o;
  lh_sync_engine* engine = nullptr;
  lh_sync_engine_options_init(&o);
  o.ranges = ranges;
  o.range_count = 2;
  // Not connected yet: the engine cannot start (docs/api.md, "Mistakes longhaul catches").
  EXPECT_EQ(lh_sync_engine_start(comm, &o, &engine), LH_ERR_CLOSED);
  EXPECT_EQ(engine, nullptr);
  // A group of one: every refusal below comes before anything is sent.
  ASSERT_EQ(lh_comm_connect(comm), LH_OK) << lh_comm_last_error(comm);
  auto expect_refused = [&](const char* what, lh_status code, const char* text) {
    EXPECT_EQ(lh_sync_engine_start(comm, &o, &engine), code) << what;
    EXPECT_EQ(engine, nullptr);
    EXPECT_NE(std::string(lh_comm_last_error(comm)).find(text), std::string::npos)
        << what << ": " << lh_comm_last_error(comm);
    lh_sync_engine_options_init(&o);
    o.ranges = ranges;
    o.range_count = 2;
  };
  lh_sync_engine_options_init(&o);
  o.ranges = ranges;
  o.range_count = 2;
  lh_fragment_piece overlapping[] = {{0, 0, 0, 40}, {0, 0, 30, 20}};
  o.pieces = overlapping;
  o.piece_count = 2;
  expect_refused("overlap", LH_ERR_INVALID_ARGUMENT, "overlap");
  lh_fragment_piece outside[] = {{0, 1, 60, 10}};
  o.pieces = outside;
  o.piece_count = 1;
  expect_refused("outside", LH_ERR_INVALID_ARGUMENT, "exceeds");
  o.sync_every = 0;
  expect_refused("H = 0", LH_ERR_INVALID_ARGUMENT, "H");
  o.delay = o.sync_every;
  expect_refused("tau >= H", LH_ERR_INVALID_ARGUMENT, "below H");
  o.adaptive_deadline = 1;
  expect_refused("an adaptive deadline without its cap", LH_ERR_INVALID_ARGUMENT,
                 "needs a deadline > 0");
  ranges[1].dtype = LH_DTYPE_F64;
  expect_refused("f64", LH_ERR_UNSUPPORTED, "f32 or bf16");
  ranges[1].dtype = LH_DTYPE_F32;

  // The group of one runs the engine alone.
  o.sync_every = 2;
  ASSERT_EQ(lh_sync_engine_start(comm, &o, &engine), LH_OK) << lh_comm_last_error(comm);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(lh_sync_engine_step(engine), LH_OK);
  EXPECT_EQ(lh_sync_engine_close(engine), LH_OK);
  EXPECT_EQ(lh_sync_engine_step(engine), LH_ERR_CLOSED);
  EXPECT_EQ(lh_sync_engine_close(engine), LH_OK);  // idempotent
  lh_sync_stats stats;
  ASSERT_EQ(lh_sync_engine_get_stats(engine, &stats), LH_OK);
  EXPECT_EQ(stats.steps, 5u);
  EXPECT_EQ(stats.rounds_applied, 2u);
  lh_sync_engine_destroy(engine);
  lh_comm_destroy(comm);
}

// Every peer checkpoints after step 55 (Streaming DiLoCo, τ = 1: fragment 3's round is in flight
// there) and stops; a new group of processes resumes from the checkpoints and ends bit-identical
// to a run that was never interrupted. The peers join in the same order every time, so the ring
// (and with it the order in which the all-reduce adds) is the same.
TEST_F(SyncEngineTest, PeersResumedFromCheckpointsContinueExactly) {
  const Training run{3, 100, 20, 4, 1, {}};
  std::vector<Child*> straight;
  for (uint32_t i = 0; i < run.peers; ++i) {
    straight.push_back(&start(run, i));
    ASSERT_NE(id_of(*straight.back()), 0u);
  }
  std::vector<Final> want;
  for (Child* p : straight) {
    auto f = final_of(*p);
    ASSERT_TRUE(f) << why(*p);
    want.push_back(*f);
  }
  Cluster second;  // a fresh master: the resumed group is a new run of the same training
  std::vector<std::string> dirs;
  std::vector<std::unique_ptr<Child>> stopped, resumed;
  auto spawn = [&](std::vector<std::unique_ptr<Child>>& into, uint32_t i,
                   std::vector<std::string> more) {
    auto args = peer_args(second, run, i);
    args.insert(args.end(), more.begin(), more.end());
    into.push_back(std::make_unique<Child>(args, second.dir().path() + "/p" + std::to_string(i) +
                                                     std::to_string(into.size()) + ".log"));
  };
  for (uint32_t i = 0; i < run.peers; ++i) {
    dirs.push_back(second.dir().path() + "/ckpt" + std::to_string(i));
    ASSERT_EQ(::mkdir(dirs.back().c_str(), 0700), 0);
    spawn(stopped, i, {"--checkpoint-at", "55", "--checkpoint-dir", dirs.back()});
    ASSERT_NE(id_of(*stopped.back()), 0u);
  }
  for (auto& p : stopped) {
    ASSERT_EQ(p->wait_exit(120s), 0) << why(*p);
    ASSERT_FALSE(p->last_line("checkpointed").empty()) << why(*p);
  }
  Cluster third;
  for (uint32_t i = 0; i < run.peers; ++i) {
    auto args = peer_args(third, run, i);
    args.insert(args.end(), {"--resume-dir", dirs[i]});
    resumed.push_back(std::make_unique<Child>(args, third.dir().path() + "/r" + std::to_string(i)));
    ASSERT_NE(id_of(*resumed.back()), 0u);
  }
  for (uint32_t i = 0; i < run.peers; ++i) {
    auto f = final_of(*resumed[i]);
    ASSERT_TRUE(f) << why(*resumed[i]);
    EXPECT_TRUE(resumed[i]->last_line("started").find("started step 55") == 0)
        << resumed[i]->last_line("started");
    EXPECT_EQ(f->hash, want[0].hash) << "peer " << i;
    EXPECT_EQ(f->global, want[0].global) << "peer " << i;
  }
}

// The C++ API over the same calls: RAII, exceptions carrying the status.
TEST_F(SyncEngineTest, TheCppApiRunsAGroupOfOneAndThrowsAfterClose) {
  longhaul::CommunicatorOptions co;
  co.master_address = cluster_.master_address();
  co.listen_address = "127.0.0.1:0";
  longhaul::Communicator comm(co);
  comm.connect();
  std::vector<float> w(32, 1.0f);
  std::vector<uint16_t> b(16, 0x3F80);  // bf16 1.0
  longhaul::SyncEngineOptions o;
  o.add(w).add_bf16(b);
  o.c.sync_every = 3;
  longhaul::SyncEngine engine(comm, o);
  for (int i = 0; i < 6; ++i) engine.step();
  engine.close();
  EXPECT_EQ(engine.stats().rounds_applied, 2u);
  // A group of one: θ_g is its own parameters, both ranges in fragment 0.
  const auto global = engine.global(0, 48);
  EXPECT_EQ(std::vector<float>(global.begin(), global.begin() + 32), w);
  EXPECT_EQ(global[40], 1.0f);
  try {
    engine.step();
    FAIL() << "step after close did not throw";
  } catch (const longhaul::Error& e) {
    EXPECT_EQ(e.status(), LH_ERR_CLOSED);
  }
}

}  // namespace
}  // namespace longhaul::testing
