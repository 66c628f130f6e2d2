// The --json line of longhaul-churn's report.
#pragma once

#include <cstddef>
#include <string>

#include "churn_flags.hpp"
#include "run_monitor.hpp"

namespace longhaul_churn {

// One JSON object, in one line, with the run's outcome ("result": "pass", "fail" or "error") and
// its counts. Scripts and CI parse these names: keep each name's meaning and type.
std::string summary_json(const Flags& flags, int exit_status, const RunMonitor::Summary& summary,
                         size_t violations);

}  // namespace longhaul_churn
