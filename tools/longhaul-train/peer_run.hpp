// longhaul-train --master: one peer of a group training the GPT together (docs/trainer.md). The
// same loop runs every method (sync_method.hpp): the peer trains on its shard, syncs, validates
// theta_g, checkpoints, logs, and leaves gracefully on SIGTERM.
#pragma once

#include "cli_options.hpp"

namespace longhaul::train::cli {

// Trains as the flags say; the process's exit status.
int run_peer(const Options& o);

}  // namespace longhaul::train::cli
