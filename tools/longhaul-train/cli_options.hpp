// Command line of longhaul-train: every flag and its default (the help text is built from these).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "longhaul/longhaul.h"
#include "train/trainer.hpp"

namespace longhaul::train::cli {

// How a peer trains with its group: a gradient all-reduce every step (dp), or one of the sync
// engine's outer loops (streaming is DiLoCo with fragments and a delay).
enum class Method { kDataParallel, kDiLoCo, kStreaming, kCo2, kEager };
const char* method_name(Method method);

// The flags of a peer (--master given): how it joins its group and how it syncs.
struct PeerOptions {
  std::string master;  // "host:port"; empty: train alone
  std::string secret_file;
  std::string secret;  // read from secret_file
  std::string listen = "0.0.0.0:0";
  std::string advertise;  // empty: the address the master sees
  int peers = 1;          // the group that starts together, and the number of data shards
  int peer_index = 0;     // this peer's shard of the training split
  bool join = false;      // join a running group instead of starting one
  Method method = Method::kDiLoCo;
  // H, F, tau, mix, outer lr and momentum, codec (dp: its all-reduce's), loss policy; the
  // defaults are lh_sync_engine_options_init's, except streaming's F = 4 and tau = 1.
  lh_sync_engine_options sync{};
  bool full_mesh = false;
  std::uint32_t connections = 1;  // TCP connections per data link
  // > 0: event lines on stdout for a supervisor (longhaul-churn): JOINED once the peer trains
  // with the group, THETA after every theta_every-th step (report.hpp has their format).
  std::int64_t theta_every = 0;
};

struct Options {
  TrainOptions train;             // model sizes, batch, seeds, AdamW, schedule, clipping
  std::vector<std::string> data;  // files or directories; empty: Python's standard library
  std::int64_t steps = 300;
  std::int64_t stop_at = 0;  // > 0: stop after this step, as if interrupted (resume later)
  int threads = 0;           // 0: one per hardware thread
  int val_every = 50;        // steps between validation runs (and at the end)
  int val_batches = 16;
  int checkpoint_every = 0;           // 0: only at the end
  std::string out_dir = "train-out";  // log.csv, loss.png, checkpoint.bin (engine.bin)
  std::string resume;                 // checkpoint file, or the directory holding it
  std::string plot_script = LH_PLOT_SCRIPT;
  // The plotter of a peer's timeline.png (timeline.hpp); `plot` draws it beside loss.png.
  std::string timeline_script = LH_TIMELINE_SCRIPT;
  bool plot = true;
  bool profile = false;  // per-layer time breakdown at the end
  bool json = false;     // one JSON summary as the last line of stdout
  int bench_warmup = 0;  // steps excluded from the tokens/s figure
  // --dump-dir, --dump-steps: parameters around these syncs (sync_dump.hpp); empty dir: none.
  std::string dump_dir;
  std::set<std::int64_t> dump_steps;
  PeerOptions peer;
};

// Parses argv into *options. Returns the exit status when the program must stop now: 0 after
// --help, 2 after a bad flag or a model that cannot be built (one line on stderr says why).
std::optional<int> parse(int argc, char** argv, Options* options);

}  // namespace longhaul::train::cli
