// longhaul-train alone: the single-process training loop (no --master).
#pragma once

#include "cli_options.hpp"

namespace longhaul::train::cli {

// Trains as the flags say; the process's exit status.
int run_local(const Options& o);

}  // namespace longhaul::train::cli
