// What every run needs before its first step, alone or as a peer: the corpus, the trainer
// (resumed from a checkpoint if asked), the output directory and its CSV log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_options.hpp"
#include "common/status.hpp"
#include "report.hpp"
#include "train/dataset.hpp"
#include "train/trainer.hpp"

namespace longhaul::train::cli {

struct RunData {
  Corpus corpus;
  double unigram = 0;  // of the validation split under the whole training split's frequencies
};

// The corpus of --data (default: Python's standard library), with its summary line on stderr.
Result<RunData> load_data(const Options& o);

// Shard `index` of `shards` of a training split: contiguous pieces of (nearly) equal length, so
// every peer trains on its own bytes and the shards together are the whole split.
std::vector<std::uint8_t> take_shard(const std::vector<std::uint8_t>& train, int shards, int index);

// The trainer of the flags, loaded from --resume if given, with its summary line on stderr.
Result<Trainer> make_trainer(const Options& o);

// Where a run's files go, and where --resume finds them (a checkpoint file or its directory).
struct RunFiles {
  std::string csv, checkpoint, engine;
  static RunFiles in(const std::string& out_dir);
  static RunFiles resumed_from(const std::string& resume);
};

// Creates OUT and opens OUT/log.csv (appended to when resuming a run whose log exists).
Result<CsvLog> open_output(const Options& o, bool peer_columns);

}  // namespace longhaul::train::cli
