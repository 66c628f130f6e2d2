// The engine's part of a training checkpoint: what a peer needs, beside the trainer's own
// checkpoint, to continue exactly where it stopped: the shared state (θ_g, the outer state, the
// counters, the agreed overlap), this peer's own state (when each fragment was last merged, where
// eager's round started) and the round in flight, settled with the group before it is written (its
// sum, the masks and the group's decision), so that it is applied at its scheduled step after the
// resume.
//
// File layout (little-endian): "LHSYNC01", u32 version, the configuration tag (u32 length,
// bytes), then the sections below as u64 counts and raw values, then the XXH64 (seed 0) of every
// preceding byte. Written to PATH.tmp and renamed over PATH: a crash never leaves a torn file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace longhaul::sync {

struct EngineCheckpoint {
  std::string config;
  std::vector<uint64_t> counters;
  // The agreed overlap (SharedState: τ, the previous cycle's τ, the steps needed so far); empty in
  // a file of version 3 or older, written before τ could change (the configured τ then).
  std::vector<uint64_t> overlap;
  std::vector<std::vector<float>> theta_g, momentum;  // by fragment
  std::vector<uint64_t> last_reset;                   // by fragment
  // eager: where this peer's round started, as its deviation from θ_g (P values)
  std::vector<float> eager_state;
  // The sparse codec's error-feedback residual, every fragment's back to back (empty without the
  // sparse codec, and in a file of version 4 or older).
  std::vector<float> residual;
  int32_t staged_code = 0;
  bool staged_finite = true;
  // The round in flight, settled: its fragment, number, attempts, outcome, and its data (the
  // summed pseudo-gradient, or this peer's Δ for delayed methods that form it ahead).
  bool in_flight = false;
  uint32_t fragment = 0;
  uint64_t number = 0;
  uint32_t attempts = 0;
  bool late = false, applied = false;
  std::vector<float> masks;
  std::vector<uint64_t> ring;
  std::vector<float> staging;
};

Status write_checkpoint(const std::string& path, const EngineCheckpoint& c);
// LH_ERR_IO for a file that cannot be read, LH_ERR_PROTOCOL for one that is not an engine
// checkpoint, is truncated or corrupt (the checksum), with the reason.
Result<EngineCheckpoint> read_checkpoint(const std::string& path);

}  // namespace longhaul::sync
