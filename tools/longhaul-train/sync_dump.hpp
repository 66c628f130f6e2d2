// --dump-dir / --dump-steps: the parameters around chosen syncs, as raw little-endian f32 files
// in the trainer's flat layout, for an outside check of the outer rules (bench/e2e/reference
// feeds each round's pseudo-gradients, formed from these files, to its own outer rules and
// compares the theta_g it gets with ours). Files, for each listed step S (counted from 1):
//   step-S-local.bin    this peer's parameters after its inner step S, before the sync engine's
//   step-S-global.bin   theta_g after the engine's step S
//   step-S-restart.bin  this peer's parameters after the engine's step S (merge, restart)
// and init.bin (the parameters the group agreed on at the start) and final-global.bin (theta_g
// after close). Single-threaded: the trainer's loop calls it.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>

#include "common/status.hpp"

namespace longhaul::train::cli {

class SyncDump {
 public:
  SyncDump(std::string dir, const std::set<std::int64_t>& steps)
      : dir_(std::move(dir)), steps_(steps) {}

  bool enabled() const { return !dir_.empty(); }
  bool wants(std::int64_t step) const { return enabled() && steps_.count(step) > 0; }
  // Writes dir/name.bin (replacing it); a failure names the file.
  Status write(const std::string& name, std::span<const float> values) const;

 private:
  std::string dir_;
  std::set<std::int64_t> steps_;
};

}  // namespace longhaul::train::cli
