// The --json line of longhaul-churn's report.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "churn_flags.hpp"
#include "run_monitor.hpp"
#include "train_outcome.hpp"

namespace longhaul_churn {

// The train workload's figures: the churn run's, its churn-free reference's, and the loss ratio
// (absent where a run did not get that far).
struct TrainFigures {
  std::optional<TrainRun> run, reference;
  std::optional<double> ratio;
};

// One JSON object, in one line, with the run's outcome ("result": "pass", "fail" or "error") and
// its counts; with the train workload also "workload": "train" and its figures (val_loss,
// reference_val_loss, val_loss_ratio, tokens, ...; docs/churn.md). Scripts and CI parse these
// names: keep each name's meaning and type.
std::string summary_json(const Flags& flags, int exit_status, const RunMonitor::Summary& summary,
                         size_t violations, const std::optional<TrainFigures>& train = {});

}  // namespace longhaul_churn
