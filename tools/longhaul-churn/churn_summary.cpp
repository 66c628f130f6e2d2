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
      {"spawned", s.spawned},
      {"joins", s.joins},
      {"evicted_after_stop", s.evicted_after_stop},
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

}  // namespace

std::string summary_json(const Flags& flags, int exit_status, const RunMonitor::Summary& summary,
                         size_t violations) {
  return summary_object(flags, exit_status, summary, violations).dump();
}

}  // namespace longhaul_churn
