#include "cli_options.hpp"

#include <cmath>

#include "tool_cli.hpp"

namespace longhaul::train::cli {
namespace {

namespace tool = longhaul::cli;

constexpr const char* kDescription =
    "Trains the byte-level GPT on one process and writes OUT/log.csv, OUT/loss.png, "
    "OUT/checkpoint.bin.\n";
constexpr uint64_t kIntMax = INT32_MAX, kInt64Max = INT64_MAX;

// Numbers the flags carry in another form than TrainOptions keeps them.
struct Scratch {
  std::uint64_t seed;
  double lr, min_lr;
};

void add_data_and_model(CLI::App& app, Options& o) {
  app.add_option("--data", o.data,
                 "text file, or directory of *.py files (repeatable; order kept). "
                 "Default: Python's standard library (python3 sysconfig 'stdlib').")
      ->type_name("PATH")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("")
      ->group("Data");
  GptConfig& m = o.train.model;
  tool::add_number(app, "--layers", m.layers, 0, kIntMax, "transformer blocks")->group("Model");
  tool::add_number(app, "--channels", m.channels, 0, kIntMax, "model width")->group("Model");
  tool::add_number(app, "--heads", m.heads, 0, kIntMax, "attention heads; they divide --channels")
      ->group("Model");
  tool::add_number(app, "--context", m.context, 0, kIntMax, "bytes per sequence")->group("Model");
}

void add_training(CLI::App& app, Options& o, Scratch& s) {
  TrainOptions& t = o.train;
  tool::add_number(app, "--steps", o.steps, 0, kInt64Max,
                   "total optimizer steps (also the cosine schedule's length)")
      ->group("Training");
  tool::add_number(app, "--stop-at", o.stop_at, 0, kInt64Max,
                   "stop after step N as if interrupted (checkpoint saved; --resume it)")
      ->default_str("")
      ->group("Training");
  tool::add_number(app, "--batch", t.batch, 0, kIntMax, "sequences of --context bytes per step")
      ->group("Training");
  tool::add_number(app, "--lr", s.lr, 0, HUGE_VAL, "peak learning rate")->group("Training");
  tool::add_number(app, "--min-lr", s.min_lr, 0, HUGE_VAL, "learning rate at the end")
      ->group("Training");
  tool::add_number(app, "--warmup", t.schedule.warmup_steps, 0, kInt64Max, "steps of linear warmup")
      ->group("Training");
  tool::add_number(app, "--weight-decay", t.adamw.weight_decay, -HUGE_VAL, HUGE_VAL,
                   "AdamW weight decay")
      ->group("Training");
  tool::add_number(app, "--beta1", t.adamw.beta1, -HUGE_VAL, HUGE_VAL, "AdamW beta1")
      ->group("Training");
  tool::add_number(app, "--beta2", t.adamw.beta2, -HUGE_VAL, HUGE_VAL, "AdamW beta2")
      ->group("Training");
  tool::add_number(app, "--clip", t.grad_clip, -HUGE_VAL, HUGE_VAL,
                   "max global gradient norm; 0: off")
      ->group("Training");
  tool::add_number(app, "--seed", s.seed, 0, UINT64_MAX, "initialisation and batch sampling")
      ->group("Training");
  tool::add_number(app, "--threads", o.threads, 0, kIntMax, "0: one per hardware thread")
      ->group("Training");
}

void add_output(CLI::App& app, Options& o) {
  const std::string group = "Evaluation and output";
  tool::add_number(app, "--val-every", o.val_every, 0, kIntMax,
                   "steps between validation runs (and at the end)")
      ->group(group);
  tool::add_number(app, "--val-batches", o.val_batches, 0, kIntMax, "batches per validation run")
      ->group(group);
  app.add_option("--out", o.out_dir, "where log.csv, loss.png and checkpoint.bin go")
      ->type_name("DIR")
      ->group(group);
  tool::add_number(app, "--checkpoint-every", o.checkpoint_every, 0, kIntMax,
                   "steps between checkpoints; 0: only at the end")
      ->group(group);
  app.add_option("--resume", o.resume, "continue from this checkpoint")
      ->type_name("FILE")
      ->group(group);
  app.add_flag_callback(
         "--no-plot", [&o] { o.plot = false; }, "skip loss.png")
      ->group(group);
  app.add_option("--plot-script", o.plot_script, "the plotter that draws loss.png")
      ->type_name("FILE")
      ->group(group);
  app.add_flag("--profile", o.profile, "print the per-layer time breakdown")->group(group);
  app.add_flag("--json", o.json, "print a JSON summary as the last line of stdout")->group(group);
  tool::add_number(app, "--bench-warmup", o.bench_warmup, 0, kIntMax,
                   "leave the first N steps out of tokens/s")
      ->group(group);
}

// What the flags cannot say one at a time: counts that must be positive, a model that fits.
Status check(const Options& o, const Scratch& s) {
  if (o.steps < 1) return invalid_argument("--steps must be positive");
  if (o.val_every < 1 || o.val_batches < 1)
    return invalid_argument("--val-every and --val-batches must be positive");
  if (s.lr <= 0) return invalid_argument("--lr must be positive and --min-lr >= 0");
  return o.train.model.validate();
}

}  // namespace

std::optional<int> parse(int argc, char** argv, Options* o) {
  CLI::App app{kDescription, "longhaul-train"};
  tool::configure(app, "");
  TrainOptions& t = o->train;
  Scratch s{t.init_seed, t.schedule.max_lr, t.schedule.min_lr};
  add_data_and_model(app, *o);
  add_training(app, *o, s);
  add_output(app, *o);
  if (auto exit_status = tool::parse(app, argc, argv)) return exit_status;
  if (Status st = check(*o, s); !st) return tool::usage_error(app, st.message());
  t.init_seed = s.seed;
  t.data_seed = s.seed ^ 0x5EEDDA7Aull;  // a different stream from the initialisation's
  t.schedule.max_lr = static_cast<float>(s.lr);
  t.schedule.min_lr = static_cast<float>(s.min_lr);
  t.schedule.total_steps = o->steps;
  return std::nullopt;
}

}  // namespace longhaul::train::cli
