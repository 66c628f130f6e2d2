// Command line of longhaul-churn: every flag and its default (the help text is built from these).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "progress_check.hpp"

namespace longhaul_churn {

// What the peers run: longhaul-peer's synthetic loop, or longhaul-train peers training one GPT.
// peer: longhaul-peer's all-reduce loop; allgather: the same with an all-gather of 16 bytes per
// peer each step (--allgather-bytes); train: longhaul-train.
enum class Workload { kPeer, kAllGather, kTrain };

struct Flags {
  Workload workload = Workload::kPeer;
  uint32_t peers = 8;
  // Nodes (issue 21): > 0 runs `nodes` machines of `rails` longhaul-peer ranks each (peers is
  // then nodes x rails); a disruption hits one rank or a whole node, and a node whose ranks are
  // all gone is replaced by a new node.
  uint32_t nodes = 0;
  uint32_t rails = 1;
  double duration_s = 60;
  uint64_t seed = 1;
  // Churn: one disruptive event every kill_interval_ms on average (uniform in [0.5, 1.5] times it),
  // picked with these weights.
  uint32_t kill_interval_ms = 2000;
  uint32_t weight_kill = 6, weight_term = 2, weight_stop = 2;
  // Link faults on a routed peer's route through longhaul-wanem (--mix's 4th and 5th weights):
  // a reset (every connection into the peer gets an RST) or a black hole (nothing moves, nothing
  // closes) healed after blackhole_min_ms..blackhole_max_ms.
  uint32_t weight_reset = 0, weight_blackhole = 0;
  uint32_t stop_min_ms = 200, stop_max_ms = 1500;
  uint32_t blackhole_min_ms = 200, blackhole_max_ms = 1500;
  uint32_t rejoin_delay_ms = 300;  // a replacement starts this long after a peer went
  // Master restarts: every master_restart_ms on average (uniform in [0.5, 1.5] times it) the
  // master is SIGKILLed and started again on the same port with its journal; 0: never.
  uint32_t master_restart_ms = 0;
  uint32_t min_alive = 3;  // never disrupt a peer when fewer would keep stepping
  // Watching.
  uint32_t hang_ms = 15000;  // a running peer with no completed step for longer is a violation
  uint32_t join_ms = 30000;  // a started peer must have joined within this
  // After the churn ends, every survivor must complete a step within this.
  uint32_t grace_ms = 5000;
  // > 0: a recovery p99 above this, or a kill never recovered from, is a violation.
  uint32_t max_recovery_ms = 0;
  // Progress (progress_check.hpp): a group that applies no round for longer than this is a
  // violation; 0: derived from --hang-ms and the rounds' spacing.
  uint32_t max_no_round_ms = 0;
  // The train workload: theta_g's validation loss must fall by this fraction from the first
  // quarter of the evaluations to the last; 0: not checked.
  double min_loss_drop = ProgressLimits{}.min_loss_drop;
  // WAN emulation.
  double wanem_fraction = 0;
  // The packet lab instead (--sites, needs root): the master in a site of its own, the peers
  // spread round-robin over these sites, each `one_way_ms` from the master's; two peer sites are
  // the sum of their delays apart. Empty: no lab.
  struct Site {
    std::string name;
    double one_way_ms = 0;
  };
  std::vector<Site> sites;
  double latency_ms = 10, jitter_ms = 2, rate_mbit = 0;
  // Peers and the master.
  std::string codec = "u8";
  // Every connection (master and peers) uses TLS 1.3 with a certificate made for the run, and/or
  // every peer proves a random cluster secret made for the run (files in the log directory).
  bool tls = false;
  bool secret = false;
  std::vector<std::string> peer_args;  // passed to every longhaul-peer
  // The train workload: longhaul-train peers train for train_steps group steps, with these
  // arguments after the tool's defaults; the last tenth of the steps sees no churn.
  std::vector<std::string> train_args;
  int64_t train_steps = 3000;
  // The churn run's final validation loss over a churn-free run's, at the same group steps, above
  // this is a violation.
  double max_loss_ratio = 1.075;
  uint32_t heartbeat_interval_ms = 1000;
  uint32_t heartbeat_misses = 3;
  std::string bin_dir;  // where longhaul-master, -peer, -train, -wanem are; "" = beside us
  std::string log_dir;  // "" = a fresh temporary directory, removed after a clean run
  bool keep_logs = false;
  bool json = false;
  bool status = false;  // the live status line even when stderr is not a terminal
};

// Parses argv into *flags. Returns the exit status when the program must stop now: 0 after
// --help, 2 after a bad flag (one line on stderr says which and why).
std::optional<int> parse_flags(int argc, char** argv, Flags* flags);

}  // namespace longhaul_churn
