// How a peer trains a step with its group: the one thing the methods do differently. The
// distributed loop (peer_run.cpp) drives either implementation the same way, so every comparison
// of methods runs the same data, validation, checkpoint and reporting code.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cli_options.hpp"
#include "common/status.hpp"
#include "peer_group.hpp"
#include "run_setup.hpp"
#include "train/trainer.hpp"

namespace longhaul::train::cli {

struct SyncCounters {
  std::uint64_t blocked_ns = 0;        // time the trainer waited inside the method's calls
  std::uint64_t peak_event_bytes = 0;  // the most data bytes (sent + received) of one sync
  std::uint64_t rounds_applied = 0, rounds_dropped = 0, rounds_late = 0, retries = 0;
  std::uint64_t sparse_encoded_bytes = 0;  // the sparse codec's encodings, summed (engine only)
};

class SyncMethod {
 public:
  virtual ~SyncMethod() = default;
  // The start collective: the group agrees on the parameters. A peer that joined a running group
  // adopts its parameters and step (the trainer's counters follow).
  virtual Status start(Trainer& trainer) = 0;
  // One inner step of the trainer on its shard, and the method's sync after it.
  virtual Result<StepStats> step(Trainer& trainer, const std::vector<std::uint8_t>& shard) = 0;
  // theta_g, the parameters every peer of the group holds in common, in the trainer's layout.
  virtual Status global_parameters(Trainer& trainer, std::span<float> out) = 0;
  virtual SyncCounters counters() = 0;
  // The sync engine's figures (its methods; the timeline and the progress line read the overlap
  // and the rounds from them); none for data-parallel training, which has no engine.
  virtual std::optional<lh_sync_stats> engine_stats() { return std::nullopt; }
  // The method's part of a checkpoint (beside the trainer's checkpoint.bin).
  virtual Status save(const RunFiles& files) = 0;
  // Settles what is in flight with the group; no step after it.
  virtual Status close() = 0;
  // A hash of the state every peer must hold bit-identical.
  virtual Result<std::uint64_t> state_hash(Trainer& trainer) = 0;
};

// DiLoCo, Streaming DiLoCo, CO2, eager: the library's sync engine over the GPT's fragments.
std::unique_ptr<SyncMethod> make_engine_method(const Options& o, PeerGroup& group);
// A gradient all-reduce every step.
std::unique_ptr<SyncMethod> make_data_parallel(const Options& o, PeerGroup& group);

}  // namespace longhaul::train::cli
