// What a run writes about itself: the CSV log (a row per step), the --json summary (the last
// stdout line; bench/e2e/train, bench/run diloco and the tests read it: docs/trainer.md lists the
// fields, keep them stable), the per-layer breakdown and the loss plot.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "cli_options.hpp"
#include "common/status.hpp"
#include "longhaul/longhaul.h"
#include "train/profile.hpp"

namespace longhaul::train::cli {

// A peer's communication so far, for its CSV rows and its progress line.
struct PeerCounters {
  std::int64_t world = 0;  // peers in the group now
  lh_traffic traffic{};    // the communicator's bytes at its sockets since it was created
  double blocked_s = 0;    // time the trainer waited for the group
};

struct CsvRow {
  std::int64_t step = 0;
  float lr = 0, train_loss = 0;
  std::optional<float> val_loss;
  double grad_norm = 0, tokens_per_s = 0, elapsed_s = 0;
  std::optional<PeerCounters> peer;  // a peer's rows have its columns; a lone run's do not
};

// OUT/log.csv: a header (unless appending to a resumed run's log), then one row per step.
class CsvLog {
 public:
  static Result<CsvLog> open(const std::string& path, bool append, bool peer_columns);
  void write(const CsvRow& row);
  void flush() { out_.flush(); }

 private:
  CsvLog(std::ofstream out, bool peer_columns) : out_(std::move(out)), peer_(peer_columns) {}
  std::ofstream out_;
  bool peer_;
};

// What a lone run measured, for its --json line.
struct RunSummary {
  double tokens_per_s = 0;
  std::int64_t steps = 0, measured_steps = 0;
  float last_loss = 0;
  std::optional<float> last_val;
  double unigram = 0;
};

// What a peer measured, for its --json line.
struct PeerSummary {
  RunSummary run;
  std::int64_t peer_id = 0, world = 0;
  bool stopped = false;  // left early on SIGTERM/SIGINT
  double elapsed_s = 0;  // training and syncing, not validation or checkpoints
  lh_traffic traffic{};
  std::uint64_t peak_event_bytes = 0;
  double blocked_s = 0;
  std::uint64_t rounds_applied = 0, rounds_dropped = 0, rounds_late = 0, retries = 0;
  std::uint64_t sparse_encoded_bytes = 0;  // LH_CODEC_SPARSE: lh_sync_stats' figure
  std::uint64_t state_hash = 0;
};

std::string summary_json(const Options& o, const RunSummary& r, const Profile& profile);

// The event lines of --theta-every, for a supervisor (longhaul-churn reads them; keep them
// stable): "JOINED id=I epoch=E world=W step=S round_every=K" once the peer trains with its group
// (S: the group's step it starts from; K: the steps between two of the method's rounds, as
// configured), "THETA step=S hash=H world=W epoch=E rounds=R" after step S, H being the 16 hex
// digits of the state every peer must hold bit-identical after that step and R the rounds this
// peer has applied so far (its method's rounds_applied), and "VAL step=S loss=L" after each
// periodic validation of theta_g (--val-every). Two peers reporting one step with different
// hashes have diverged; a group whose R stops growing, or whose L does not fall, trains nothing
// (longhaul-churn's progress check, docs/churn.md).
std::string joined_event(std::int64_t peer_id, std::int64_t epoch, std::int64_t world,
                         std::int64_t step, std::int64_t round_every);
std::string theta_event(std::int64_t step, std::uint64_t hash, std::int64_t world,
                        std::int64_t epoch, std::uint64_t rounds);
std::string val_event(std::int64_t step, float loss);
// One event line on stdout, flushed at once (the supervisor acts on it while the run goes on).
void print_event(const std::string& line);
std::string peer_summary_json(const Options& o, const PeerSummary& s);

// The per-layer time table of --profile.
std::string breakdown_table(const Profile& prof, std::int64_t steps);

// OUT/loss.png from the CSV through scripts/plot_loss.py; a warning when that fails.
void plot_loss(const Options& o, const std::string& csv_path, double unigram);

}  // namespace longhaul::train::cli
