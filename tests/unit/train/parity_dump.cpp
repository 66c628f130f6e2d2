// Writes what the PyTorch parity test (tests/python/train/test_torch_parity.py) compares:
//   OUT/config.json            model sizes and training hyperparameters
//   OUT/init.{json,bin}        the initial parameters and the batches (tokens as floats)
//   OUT/step0.{json,bin}       logits, loss and every gradient of the first batch
//   OUT/final.{json,bin}       per-step loss / grad norm / lr, the parameters after the first
//                              step (after1.NAME) and after all steps (NAME)
// Usage: train_parity_dump OUT_DIR [STEPS]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <string>
#include <vector>

#include "train/dataset.hpp"
#include "train/param_layout.hpp"
#include "train/rng.hpp"
#include "train/tensor_file.hpp"
#include "train/threads.hpp"
#include "train/trainer.hpp"

namespace lt = longhaul::train;

namespace {

std::vector<lt::NamedTensor> parameter_tensors(const lt::GptConfig& config,
                                               std::span<const float> flat,
                                               const std::string& prefix) {
  std::vector<lt::NamedTensor> out;
  for (const lt::TensorSpec& s : lt::parameter_layout(config)) {
    out.push_back({prefix + s.name, s.shape, flat.subspan(s.offset, s.size)});
  }
  return out;
}

constexpr int kSkipped = 77;

int fail(const longhaul::Status& s) {
  std::fprintf(stderr, "train_parity_dump: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_parity_dump OUT_DIR [STEPS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int steps = argc > 2 ? std::atoi(argv[2]) : 3;
  lt::set_thread_count(0);

  lt::TrainOptions options;  // the default model: what the parity claim is about
  options.batch = 4;
  options.init_seed = 42;
  options.data_seed = 7;
  options.schedule = lt::LrSchedule{1e-3f, 1e-4f, 2, steps};
  options.grad_clip = 1.0;
  longhaul::Result<lt::Trainer> made = lt::Trainer::create(options);
  if (!made && made.status().code() == LH_ERR_UNSUPPORTED) {
    // LONGHAUL_FORCE_ISA names a build this CPU cannot run: ctest's skip code, which
    // test_torch_parity.py --isa passes on.
    std::printf("skipped: %s\n", made.status().to_string().c_str());
    return kSkipped;
  }
  if (!made) return fail(made.status());
  lt::Trainer& trainer = *made;
  const lt::GptConfig& config = options.model;

  // Text-like bytes: a random walk over printable ASCII, so every batch differs but is not noise.
  std::vector<std::uint8_t> text(20000);
  lt::Rng rng(1);
  int c = 'a';
  for (std::uint8_t& b : text) {
    c = 32 + static_cast<int>((static_cast<std::uint64_t>(c - 32) + rng.below(7) + 92) % 95);
    b = static_cast<std::uint8_t>(c);
  }

  const std::vector<float> init(trainer.model().params().begin(), trainer.model().params().end());
  std::vector<std::vector<float>> batch_floats;
  std::vector<lt::Batch> batches;
  for (int s = 0; s < steps; ++s) {
    longhaul::Result<lt::Batch> b = lt::train_batch(
        text, options.batch, config.context, options.data_seed, static_cast<std::uint64_t>(s));
    if (!b) return fail(b.status());
    batches.push_back(*b);
    batch_floats.emplace_back(b->inputs.begin(), b->inputs.end());
    batch_floats.emplace_back(b->targets.begin(), b->targets.end());
  }
  std::vector<lt::NamedTensor> init_tensors = parameter_tensors(config, init, "");
  for (int s = 0; s < steps; ++s) {
    const std::vector<int> shape = {options.batch, config.context};
    init_tensors.push_back({"inputs" + std::to_string(s), shape, batch_floats[2 * s]});
    init_tensors.push_back({"targets" + std::to_string(s), shape, batch_floats[2 * s + 1]});
  }
  longhaul::Status st = lt::write_tensors(dir + "/init", init_tensors);
  if (!st) return fail(st);

  // Step 0's forward and backward, before any update.
  lt::Gpt& model = trainer.model();
  const lt::Batch& b0 = batches[0];
  longhaul::Result<float> loss0 = model.forward(b0.inputs.data(), b0.targets.data(), b0.B, b0.T);
  if (!loss0) return fail(loss0.status());
  model.zero_grad();
  st = model.backward();
  if (!st) return fail(st);
  const std::vector<float> logits(model.logits().begin(), model.logits().end());
  const std::vector<float> grads(model.grads().begin(), model.grads().end());
  const float loss_value = *loss0;
  std::vector<lt::NamedTensor> step0 = parameter_tensors(config, grads, "grad.");
  step0.push_back({"logits", {options.batch, config.context, config.vocab}, logits});
  step0.push_back({"loss", {1}, std::span<const float>(&loss_value, 1)});
  st = lt::write_tensors(dir + "/step0", step0);
  if (!st) return fail(st);

  // The training steps: forward, backward, clip, AdamW with the schedule's lr.
  std::vector<float> losses, norms, lrs, after_first;
  for (int s = 0; s < steps; ++s) {
    longhaul::Result<lt::StepStats> stats = trainer.step_on(batches[static_cast<std::size_t>(s)]);
    if (!stats) return fail(stats.status());
    losses.push_back(stats->loss);
    norms.push_back(static_cast<float>(stats->grad_norm));
    lrs.push_back(stats->lr);
    if (s == 0) after_first.assign(model.params().begin(), model.params().end());
  }
  const std::vector<float> final_params(model.params().begin(), model.params().end());
  std::vector<lt::NamedTensor> fin = parameter_tensors(config, final_params, "");
  for (lt::NamedTensor& t : parameter_tensors(config, after_first, "after1.")) fin.push_back(t);
  fin.push_back({"step_loss", {steps}, losses});
  fin.push_back({"step_grad_norm", {steps}, norms});
  fin.push_back({"step_lr", {steps}, lrs});
  st = lt::write_tensors(dir + "/final", fin);
  if (!st) return fail(st);

  std::ofstream cfg(dir + "/config.json");
  const lt::AdamWOptions& a = options.adamw;
  cfg << "{\"vocab\": " << config.vocab << ", \"context\": " << config.context
      << ", \"layers\": " << config.layers << ", \"channels\": " << config.channels
      << ", \"heads\": " << config.heads << ", \"batch\": " << options.batch
      << ", \"steps\": " << steps << std::setprecision(17) << ", \"beta1\": " << a.beta1
      << ", \"beta2\": " << a.beta2 << ", \"eps\": " << a.eps
      << ", \"weight_decay\": " << a.weight_decay << ", \"grad_clip\": " << options.grad_clip
      << ", \"decay\": [";
  bool first = true;
  for (const lt::TensorSpec& s : lt::parameter_layout(config)) {
    if (!s.decay) continue;
    cfg << (first ? "" : ", ") << "\"" << s.name << "\"";
    first = false;
  }
  cfg << "]}\n";
  if (!cfg) return fail(longhaul::io_error("cannot write config.json"));
  return 0;
}
