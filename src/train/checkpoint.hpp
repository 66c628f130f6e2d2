// Checkpoints: everything a Trainer needs to continue exactly where it stopped.
//
// File layout (little-endian):
//   "LHTRAIN1"                                   8 bytes magic
//   u32 version (1)
//   i32 vocab, context, layers, channels, heads   the model's shape
//   i64 step, u64 data_index, i64 adamw_steps
//   u64 n                                        parameter count
//   f32 params[n], adam_m[n], adam_v[n]
//   u64 XXH64 of all preceding bytes (seed 0)    detects truncation and corruption
// Saving writes PATH.tmp and renames it over PATH, so a crash never leaves a torn checkpoint.
#pragma once

#include <string>

#include "common/status.hpp"
#include "train/trainer.hpp"

namespace longhaul::train {

Status save_checkpoint(const std::string& path, Trainer& trainer);

// Restores parameters, optimizer state, step and data position into a Trainer created with the
// same model config. Hyperparameters (lr schedule, batch, seeds) come from its options, not the
// file. On error the trainer is unchanged.
Status load_checkpoint(const std::string& path, Trainer& trainer);

}  // namespace longhaul::train
