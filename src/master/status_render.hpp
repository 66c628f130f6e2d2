// The three views of a RunStatus the master serves over HTTP (docs/operations.md): the JSON of
// /api/status, the Prometheus text of /metrics, and the HTML status page, which draws itself from
// /api/status in the browser. Pure functions of a published RunStatus: they run on the HTTP
// server's threads and never touch the master's state machine.
//
// No output carries a secret: the cluster secret and TLS keys never enter a RunStatus.
#pragma once

#include <string>

#include "master/run_status.hpp"

namespace longhaul::master {

std::string status_json(const RunStatus& status);
std::string status_metrics(const RunStatus& status);
// The page (HTML, CSS and script in one document, no external resources).
const std::string& status_page_html();

}  // namespace longhaul::master
