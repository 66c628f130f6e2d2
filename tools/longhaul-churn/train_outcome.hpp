// How a train run ends (--workload train): the --json summaries the longhaul-train peers print
// last, what the survivors must agree on, and the comparison with the churn-free reference run.
// Pure logic, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace longhaul_churn {

// The fields of one peer's summary that the checks read.
struct TrainSummary {
  std::string peer;
  int64_t steps = 0;
  bool stopped = false;  // it left early on SIGTERM
  std::optional<double> val_loss;
  std::string state_hash;
  int64_t batch = 0, context = 0;
};

// A line of a train peer's stdout that is its --json summary; nullopt for any other line (an
// event line, or a JSON object without longhaul-train's fields).
std::optional<TrainSummary> parse_train_summary(const std::string& peer, const std::string& line);

// What the survivors (peers that trained to the end, not stopped) ended with.
struct TrainEnd {
  size_t survivors = 0;
  double val_loss = 0;                // of theta_g, which every survivor holds
  int64_t tokens_per_batch = 0;       // batch x context of one peer's step
  std::vector<std::string> problems;  // each one a violation
};

// Every survivor must have trained `steps` steps and end with the same state hash and the same
// validation loss; there must be at least one.
TrainEnd judge_survivors(const std::vector<TrainSummary>& summaries, int64_t steps);

// A train run's result, for its summary and for comparing a churn run with its reference.
struct TrainRun {
  double val_loss = 0;
  int64_t steps = 0;         // the group's steps (--train-steps)
  uint64_t world_steps = 0;  // the sum over the group's steps of the group's size
  uint64_t tokens = 0;       // world_steps x batch x context
  size_t survivors = 0;
  uint64_t unadmitted = 0;   // replacements the group never admitted before it finished
  double seconds = 0;        // from the first peer's start to the last one's exit
  double churn_seconds = 0;  // of those, the churn: until --duration or the calm last tenth
};

// The churn run's loss over the reference's; a violation's text when above max_ratio (or not a
// finite positive ratio).
struct LossComparison {
  double ratio = 0;
  std::optional<std::string> problem;
};
LossComparison compare_losses(double val_loss, double reference_val_loss, double max_ratio);

// The steps of a churn-free run of `peers` peers that trains on the tokens of `run`: its
// world_steps over the group's nominal size, rounded to the nearest step (at least one).
int64_t equal_token_steps(const TrainRun& run, uint32_t peers);

}  // namespace longhaul_churn
