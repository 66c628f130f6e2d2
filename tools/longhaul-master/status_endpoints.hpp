// The master daemon's HTTP endpoints (docs/operations.md): the status page at /, its data at
// /api/status, Prometheus metrics at /metrics, and /healthz. Each answers from the run the master
// last published (Master::status), never by asking the master's event loop.
#pragma once

#include <memory>

#include "master/master.hpp"
#include "ops/http_server.hpp"

namespace longhaul::master {

Result<std::unique_ptr<ops::HttpServer>> serve_status(Master& master,
                                                      const ops::HttpOptions& options);

}  // namespace longhaul::master
