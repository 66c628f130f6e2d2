// Where a peer's time went, step by step (docs/trainer.md, "Timeline"): OUT/timeline.csv has one
// row per step (its compute, the time blocked in the method's sync calls, τ and what each
// fragment's round did), OUT/timeline_rounds.csv one row per settled round of the sync engine
// (its launch and the time its result was ready here: its time on the network), and
// scripts/plot_timeline.py draws both as OUT/timeline.png. Data-parallel training has no engine:
// its rows have compute and blocked (the gradient all-reduce) only, and it has no rounds file.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "longhaul/longhaul.h"

namespace longhaul::train::cli {

// One step as the trainer's loop timed it.
struct StepTiming {
  std::int64_t step = 0;  // the step's number (the trainer's count after it)
  double start_s = 0;     // when it began, in seconds since the timeline's origin
  double wall_s = 0;      // the method's step call: compute and blocked
  double blocked_s = 0;   // of it, the time inside the method's sync calls
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  // Opens OUT/timeline.csv (and, for an engine, OUT/timeline_rounds.csv with `fragments`
  // columns), appended to when `append` and they exist. Times are seconds since `origin`.
  static Result<Timeline> open(const std::string& out_dir, bool append,
                               std::optional<std::uint32_t> fragments, Clock::time_point origin);

  // The engine's figures before the first step (after its start): what that step is compared
  // with. Nothing for data-parallel training.
  void begin(const std::optional<lh_sync_stats>& engine) { previous_ = engine; }
  // After each step: its row, and a row for each round that settled in it.
  void record(const StepTiming& t, const std::optional<lh_sync_stats>& engine);
  // After the method's close at `step`: the round it settled, if any, goes to the rounds file.
  void finish(std::int64_t step, const std::optional<lh_sync_stats>& engine);
  void flush();

 private:
  Timeline(std::ofstream steps, std::ofstream rounds, std::uint32_t fragments,
           Clock::time_point origin);
  // The rounds settled between the previous figures and `now`, in order; their letters join
  // the fragments' codes of this step.
  void settle(std::int64_t step, const lh_sync_stats& now);
  void settle_round(std::int64_t step, std::uint32_t fragment, std::uint64_t round, bool applied,
                    std::uint64_t launched_ns, std::uint64_t ready_ns, bool launched_here);
  void launch(std::int64_t step, const lh_sync_stats& now);
  std::string seconds_since_origin(std::uint64_t steady_ns) const;

  std::ofstream steps_, rounds_;
  std::uint32_t fragments_ = 0;  // 0: no engine
  std::int64_t origin_ns_ = 0;   // the origin on the steady clock
  std::optional<lh_sync_stats> previous_;
  std::vector<std::string> codes_;         // this step's letters per fragment
  std::vector<std::int64_t> launch_step_;  // per fragment: its round in flight's launch (-1)
};

// OUT_DIR/timeline.png from the two files through `script` (scripts/plot_timeline.py, or
// --timeline-script); a warning when that fails.
void plot_timeline(const std::string& script, const std::string& out_dir);

}  // namespace longhaul::train::cli
