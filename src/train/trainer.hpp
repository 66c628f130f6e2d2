// The inner training loop on one process: batch -> forward -> backward -> clip -> AdamW.
// Everything that decides the next step (parameters, AdamW moments, step count, data position)
// is in this object and in the checkpoint, so a resumed run continues bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.hpp"
#include "train/adamw.hpp"
#include "train/dataset.hpp"
#include "train/gpt.hpp"
#include "train/lr_schedule.hpp"

namespace longhaul::train {

struct TrainOptions {
  GptConfig model;
  int batch = 16;                  // sequences per step; each is model.context bytes
  std::uint64_t init_seed = 1337;  // parameter initialisation
  std::uint64_t data_seed = 1337;  // batch sampling
  AdamWOptions adamw;
  LrSchedule schedule;
  double grad_clip = 1.0;  // max global gradient norm; <= 0 disables
};

struct StepStats {
  float loss = 0.0f;
  double grad_norm = 0.0;  // before clipping
  float lr = 0.0f;
};

class Trainer {
 public:
  static Result<Trainer> create(const TrainOptions& options);

  // One optimizer step on training batch number data_index() of `train_split`.
  Result<StepStats> step(const std::vector<std::uint8_t>& train_split);
  // One optimizer step on a given batch (does not advance data_index()).
  Result<StepStats> step_on(const Batch& batch);

  // step() in two halves, for a data-parallel peer that averages the gradients with the group
  // between them: compute_gradients runs forward and backward on training batch data_index()
  // of `train_split` (and advances data_index()), leaving the gradients in model().grads() and
  // returning the loss; apply_gradients clips whatever model().grads() then holds, takes the
  // AdamW step at this step's learning rate and advances step_count(). Together they do exactly
  // what step() does.
  Result<float> compute_gradients(const std::vector<std::uint8_t>& train_split);
  Result<float> compute_gradients(const Batch& batch);
  StepStats apply_gradients();
  // Mean loss over `batches` fixed validation batches.
  Result<float> evaluate(const std::vector<std::uint8_t>& val_split, int batches);

  std::int64_t step_count() const { return step_; }
  std::uint64_t data_index() const { return data_index_; }
  const TrainOptions& options() const { return options_; }
  Gpt& model() { return model_; }
  AdamW& optimizer() { return adamw_; }

  // For checkpoint loading: the counters that go with restored parameters and moments.
  void restore_counters(std::int64_t step, std::uint64_t data_index);

 private:
  Trainer(const TrainOptions& options, Gpt model);

  TrainOptions options_;
  Gpt model_;
  AdamW adamw_;
  std::int64_t step_ = 0;
  std::uint64_t data_index_ = 0;
  float last_loss_ = 0.0f;  // of the last compute_gradients, for apply_gradients' StepStats
};

}  // namespace longhaul::train
