#include "train/trainer.hpp"

#include "train/grad_clip.hpp"
#include "train/init.hpp"

namespace longhaul::train {

Trainer::Trainer(const TrainOptions& options, Gpt model)
    : options_(options), model_(std::move(model)), adamw_(options.model, options.adamw) {}

Result<Trainer> Trainer::create(const TrainOptions& options) {
  if (options.batch < 1) return invalid_argument("batch must be positive");
  Result<Gpt> model = Gpt::create(options.model);
  if (!model) return model.status();
  init_parameters(model->params().data(), options.model, options.init_seed);
  return Trainer(options, std::move(model).value());
}

Result<StepStats> Trainer::step(const std::vector<std::uint8_t>& train_split) {
  Result<Batch> batch = train_batch(train_split, options_.batch, options_.model.context,
                                    options_.data_seed, data_index_);
  if (!batch) return batch.status();
  Result<StepStats> stats = step_on(*batch);
  if (stats) ++data_index_;
  return stats;
}

Result<StepStats> Trainer::step_on(const Batch& batch) {
  Result<float> loss = compute_gradients(batch);
  if (!loss) return loss.status();
  return apply_gradients();
}

Result<float> Trainer::compute_gradients(const std::vector<std::uint8_t>& train_split) {
  Result<Batch> batch = train_batch(train_split, options_.batch, options_.model.context,
                                    options_.data_seed, data_index_);
  if (!batch) return batch.status();
  Result<float> loss = compute_gradients(*batch);
  if (loss) ++data_index_;
  return loss;
}

Result<float> Trainer::compute_gradients(const Batch& batch) {
  Result<float> loss = model_.forward(batch.inputs.data(), batch.targets.data(), batch.B, batch.T);
  if (!loss) return loss.status();
  last_loss_ = *loss;
  model_.zero_grad();
  LH_RETURN_IF_ERROR(model_.backward());
  return *loss;
}

StepStats Trainer::apply_gradients() {
  StepStats stats;
  stats.loss = last_loss_;
  {
    Profile* prof = model_.profile();
    ScopedPhase t(prof, Phase::kClip, false);
    stats.grad_norm = clip_grad_norm(model_.grads(), options_.grad_clip);
  }
  stats.lr = options_.schedule.at(step_);
  {
    ScopedPhase t(model_.profile(), Phase::kOptimizer, false);
    adamw_.step(model_.params(), model_.grads(), stats.lr);
  }
  ++step_;
  return stats;
}

Result<float> Trainer::evaluate(const std::vector<std::uint8_t>& val_split, int batches) {
  double total = 0.0;
  for (int i = 0; i < batches; ++i) {
    Result<Batch> batch = val_batch(val_split, options_.batch, options_.model.context, i, batches);
    if (!batch) return batch.status();
    Result<float> loss =
        model_.forward(batch->inputs.data(), batch->targets.data(), batch->B, batch->T);
    if (!loss) return loss.status();
    total += *loss;
  }
  return static_cast<float>(total / batches);
}

void Trainer::restore_counters(std::int64_t step, std::uint64_t data_index) {
  step_ = step;
  data_index_ = data_index;
}

}  // namespace longhaul::train
