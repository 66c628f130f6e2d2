// Command line of longhaul-train: every flag and its default (the help text is built from these).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "train/trainer.hpp"

namespace longhaul::train::cli {

struct Options {
  TrainOptions train;             // model sizes, batch, seeds, AdamW, schedule, clipping
  std::vector<std::string> data;  // files or directories; empty: Python's standard library
  std::int64_t steps = 300;
  std::int64_t stop_at = 0;  // > 0: stop after this step, as if interrupted (resume later)
  int threads = 0;           // 0: one per hardware thread
  int val_every = 50;        // steps between validation runs (and at the end)
  int val_batches = 16;
  int checkpoint_every = 0;           // 0: only at the end
  std::string out_dir = "train-out";  // log.csv, loss.png, checkpoint.bin
  std::string resume;                 // checkpoint to continue from
  std::string plot_script = LH_PLOT_SCRIPT;
  bool plot = true;
  bool profile = false;  // per-layer time breakdown at the end
  bool json = false;     // one JSON summary as the last line of stdout
  int bench_warmup = 0;  // steps excluded from the tokens/s figure
};

// Parses argv into *options. Returns the exit status when the program must stop now: 0 after
// --help, 2 after a bad flag or a model that cannot be built (one line on stderr says why).
std::optional<int> parse(int argc, char** argv, Options* options);

}  // namespace longhaul::train::cli
