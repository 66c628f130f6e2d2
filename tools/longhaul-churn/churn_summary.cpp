#include "churn_summary.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace longhaul_churn {
namespace {

// x to one decimal, as the human summary prints it.
double tenths(double x) {
  return std::round(x * 10) / 10;
}

nlohmann::ordered_json summary_object(const Flags& flags, int exit_status,
                                      const RunMonitor::Summary& s, size_t violations) {
  return {
      {"result", exit_status == 0   ? "pass"
                 : exit_status == 1 ? "fail"
                                    : "error"},
      {"duration_s", tenths(flags.duration_s)},
      {"peers", flags.peers},
      {"seed", flags.seed},
      {"wanem_fraction", flags.wanem_fraction},
      {"steps", s.group_steps},
      {"peer_steps", s.peer_steps},
      {"hash_comparisons", s.hashes_compared},
      {"kills", s.kills},
      {"terms", s.terms},
      {"stops", s.stops},
      {"link_resets", s.link_resets},
      {"blackholes", s.blackholes},
      {"master_restarts", s.master_restarts},
      {"tls", flags.tls},
      {"secret", flags.secret},
      {"spawned", s.spawned},
      {"joins", s.joins},
      {"evicted_after_stop", s.evicted_after_stop},
      {"nodes", flags.nodes},
      {"rails", flags.rails},
      {"node_evictions", s.node_evictions},
      {"aborted_ops", s.aborted_ops},
      {"sync_retries", s.sync_retries},
      {"recoveries", s.recoveries_ms.size()},
      {"recovery_p50_ms", tenths(s.recovery_p50_ms)},
      {"recovery_p99_ms", tenths(s.recovery_p99_ms)},
      {"recovery_max_ms", tenths(s.recovery_max_ms)},
      {"unrecovered", s.unrecovered},
      {"violations", violations},
  };
}

// x to two decimals.
double hundredths(double x) {
  return std::round(x * 100) / 100;
}

// The progress check's figures (docs/churn.md, "Progress"); null where nothing was measured.
void add_progress(nlohmann::ordered_json& j, const Flags& flags, const RunMonitor::Summary& s) {
  using Json = nlohmann::ordered_json;
  const ProgressFigures& p = s.progress;
  const auto optional = [](const std::optional<double>& x) {
    return x ? Json(std::round(*x * 1e5) / 1e5) : Json(nullptr);
  };
  j["rounds_applied"] = p.rounds_applied ? Json(*p.rounds_applied) : Json(nullptr);
  j["rounds_applied_per_min"] = tenths(p.rounds_per_min);
  // Unrounded: the verdict compares these two, and rounded to hundredths a gap just past its
  // bound read as equal to it (15.1 s against 15.1 s in a violating run).
  j["longest_no_round_s"] = p.longest_no_round_ms / 1000;
  j["progress_bound_s"] = p.bound_ms / 1000;
  j["round_every_steps"] = p.round_every_steps;
  j["median_step_ms"] = hundredths(p.median_step_ms);
  j["val_evaluations"] = p.val_evaluations;
  j["val_loss_first"] = optional(p.val_loss_first);
  j["val_loss_last"] = optional(p.val_loss_last);
  j["val_loss_drop"] = optional(p.val_loss_drop);
  j["min_loss_drop"] = flags.min_loss_drop;
  j["progress_violations"] = s.progress_violations;
}

// The train workload's fields; null where a run did not get that far.
void add_train(nlohmann::ordered_json& j, const Flags& flags, const TrainFigures& t) {
  using Json = nlohmann::ordered_json;
  const Json null = nullptr;
  const auto& run = t.run;
  const auto& ref = t.reference;
  j["workload"] = "train";
  j["train_steps"] = flags.train_steps;
  j["survivors"] = run ? Json(run->survivors) : null;
  j["unadmitted"] = run ? Json(run->unadmitted) : null;
  j["val_loss"] = run ? Json(run->val_loss) : null;
  j["reference_val_loss"] = ref ? Json(ref->val_loss) : null;
  j["val_loss_ratio"] = t.ratio ? Json(*t.ratio) : null;
  j["max_loss_ratio"] = flags.max_loss_ratio;
  j["tokens"] = run ? Json(run->tokens) : null;
  j["reference_tokens"] = ref ? Json(ref->tokens) : null;
  j["reference_steps"] = ref ? Json(ref->steps) : null;
  j["train_s"] = run ? Json(tenths(run->seconds)) : null;
  j["reference_s"] = ref ? Json(tenths(ref->seconds)) : null;
  j["churn_s"] = run ? Json(tenths(run->churn_seconds)) : null;
}

}  // namespace

std::string summary_json(const Flags& flags, int exit_status, const RunMonitor::Summary& summary,
                         size_t violations, const std::optional<TrainFigures>& train) {
  nlohmann::ordered_json j = summary_object(flags, exit_status, summary, violations);
  add_progress(j, flags, summary);
  if (train) add_train(j, flags, *train);
  return j.dump();
}

}  // namespace longhaul_churn
