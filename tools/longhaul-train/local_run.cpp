#include "local_run.hpp"

#include <chrono>
#include <cstdio>
#include <optional>

#include "common/log.hpp"
#include "progress.hpp"
#include "run_setup.hpp"
#include "train/checkpoint.hpp"
#include "train/threads.hpp"

namespace longhaul::train::cli {
namespace {

constexpr std::string_view kComponent = "train";

// The loop's running totals.
struct LocalLoop {
  LocalLoop(const Options& options, Trainer& t, const RunData& d, CsvLog& log)
      : o(options), trainer(t), data(d), csv(log) {}

  const Options& o;
  Trainer& trainer;
  const RunData& data;
  CsvLog& csv;
  Profile profile;
  Progress progress;
  ProgressState ps;
  double step_seconds = 0, measured_seconds = 0, elapsed = 0;
  std::int64_t measured_steps = 0, run_steps = 0;
  float last_loss = 0;
  std::optional<float> last_val;

  double tokens_per_step() const {
    return static_cast<double>(o.train.batch) * o.train.model.context;
  }
  Status step();
  void report(const StepStats& stats, std::optional<float> val);
};

Status LocalLoop::step() {
  const bool measure = run_steps >= o.bench_warmup;
  trainer.model().set_profile(measure ? &profile : nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  Result<StepStats> stats = trainer.step(data.corpus.train);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  trainer.model().set_profile(nullptr);
  if (!stats) return stats.status().with_context("step " + std::to_string(trainer.step_count()));
  ++run_steps;
  step_seconds += dt;
  elapsed += dt;
  if (measure) {
    measured_seconds += dt;
    ++measured_steps;
  }
  last_loss = stats->loss;
  std::optional<float> val;
  const std::int64_t s = trainer.step_count();
  if (s % o.val_every == 0 || s == o.steps) {
    Result<float> v = trainer.evaluate(data.corpus.val, o.val_batches);
    if (!v) return v.status().with_context("validation");
    val = last_val = *v;
  }
  report(*stats, val);
  if (o.checkpoint_every > 0 && s % o.checkpoint_every == 0) {
    Status st = save_checkpoint(RunFiles::in(o.out_dir).checkpoint, trainer);
    if (!st) log::warn(kComponent, "checkpoint: {}", st.to_string());
  }
  return Status::ok();
}

void LocalLoop::report(const StepStats& stats, std::optional<float> val) {
  const std::int64_t s = trainer.step_count();
  const double tps = tokens_per_step() * static_cast<double>(run_steps) / step_seconds;
  csv.write({s, stats.lr, stats.loss, val, stats.grad_norm, tps, elapsed, std::nullopt});
  ps.step = s;
  ps.loss = ps.loss == 0.0f ? stats.loss : 0.9f * ps.loss + 0.1f * stats.loss;
  ps.val_loss = last_val;
  ps.tokens_per_s = tps;
  ps.eta_s = static_cast<double>(o.steps - s) * step_seconds / static_cast<double>(run_steps);
  progress.update(ps);
}

int finish(LocalLoop& loop) {
  const Options& o = loop.o;
  const RunFiles files = RunFiles::in(o.out_dir);
  Status st = save_checkpoint(files.checkpoint, loop.trainer);
  if (!st) {
    log::error(kComponent, "{}", st.to_string());
    return 1;
  }
  const double tps = loop.measured_steps > 0
                         ? loop.tokens_per_step() * static_cast<double>(loop.measured_steps) /
                               loop.measured_seconds
                         : 0.0;
  std::fprintf(
      stderr, "done: step %lld, train loss %.4f, val loss %s (unigram %.4f), %.0f tokens/s\n",
      static_cast<long long>(loop.trainer.step_count()), loop.last_loss,
      loop.last_val ? fmt::format("{:.4f}", *loop.last_val).c_str() : "-", loop.data.unigram, tps);
  std::fprintf(stderr, "wrote %s and %s\n", files.csv.c_str(), files.checkpoint.c_str());
  if (o.profile && loop.measured_steps > 0)
    std::fprintf(stderr, "%s", breakdown_table(loop.profile, loop.measured_steps).c_str());
  if (o.plot && loop.run_steps > 0) plot_loss(o, files.csv, loop.data.unigram);
  if (o.json) {
    const RunSummary summary{
        tps,           loop.trainer.step_count(), loop.measured_steps, loop.last_loss,
        loop.last_val, loop.data.unigram};
    std::printf("%s\n", summary_json(o, summary, loop.profile).c_str());
  }
  return 0;
}

}  // namespace

int run_local(const Options& o) {
  set_thread_count(o.threads);
  Result<RunData> data = load_data(o);
  if (!data) {
    log::error(kComponent, "{}", data.status().to_string());
    return 1;
  }
  Result<Trainer> trainer = make_trainer(o);
  if (!trainer) {
    log::error(kComponent, "{}", trainer.status().to_string());
    return 1;
  }
  Result<CsvLog> csv = open_output(o, /*peer_columns=*/false);
  if (!csv) {
    log::error(kComponent, "{}", csv.status().to_string());
    return 1;
  }
  LocalLoop loop(o, *trainer, *data, *csv);
  loop.ps.total = o.steps;
  const std::int64_t last_step = o.stop_at > 0 && o.stop_at < o.steps ? o.stop_at : o.steps;
  while (trainer->step_count() < last_step) {
    if (Status s = loop.step(); !s) {
      loop.progress.finish();
      log::error(kComponent, "{}", s.to_string());
      return 1;
    }
  }
  loop.progress.finish();
  csv->flush();
  return finish(loop);
}

}  // namespace longhaul::train::cli
