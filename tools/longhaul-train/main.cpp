// longhaul-train: trains the embedded byte-level GPT on one process (see docs/trainer.md).
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_options.hpp"
#include "common/log.hpp"
#include "progress.hpp"
#include "train/checkpoint.hpp"
#include "train/dataset.hpp"
#include "train/param_layout.hpp"
#include "train/profile.hpp"
#include "train/threads.hpp"
#include "train/trainer.hpp"

namespace lt = longhaul::train;
namespace cli = longhaul::train::cli;
namespace fs = std::filesystem;
using longhaul::Result;
using longhaul::Status;

namespace {

constexpr std::string_view kComponent = "train";

// The default corpus: where this machine's Python keeps its standard library.
Result<std::string> python_stdlib() {
  FILE* p = popen("python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"stdlib\"])'", "r");
  if (p == nullptr) return longhaul::io_error("cannot run python3 to find the default corpus");
  char buf[4096] = {};
  const bool got = std::fgets(buf, sizeof(buf), p) != nullptr;
  const int rc = pclose(p);
  std::string path = got ? buf : "";
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  if (rc != 0 || path.empty()) {
    return longhaul::io_error("python3 did not report its stdlib path; pass --data FILE|DIR");
  }
  return path;
}

std::string breakdown_table(const lt::Profile& prof, std::int64_t steps) {
  std::string out =
      fmt::format("{:<24}{:>12}{:>12}{:>8}\n", "per step (ms)", "forward", "backward", "share");
  const double total = prof.total();
  for (int i = 0; i < static_cast<int>(lt::Phase::kCount); ++i) {
    const auto p = static_cast<lt::Phase>(i);
    const double f = prof.seconds(p, false), b = prof.seconds(p, true);
    out += fmt::format("{:<24}{:>12.2f}{:>12.2f}{:>7.1f}%\n", lt::phase_name(p),
                       1e3 * f / static_cast<double>(steps), 1e3 * b / static_cast<double>(steps),
                       total > 0 ? 100.0 * (f + b) / total : 0.0);
  }
  out += fmt::format("{:<24}{:>24.2f}\n", "total", 1e3 * total / static_cast<double>(steps));
  return out;
}

// x rounded to `decimals` places, as the --json figures always were.
double rounded(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

// Milliseconds per step of each phase that took any time: "<phase>_fwd", "<phase>_bwd".
nlohmann::ordered_json breakdown_json(const lt::Profile& prof, std::int64_t steps) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (int i = 0; i < static_cast<int>(lt::Phase::kCount); ++i) {
    const auto p = static_cast<lt::Phase>(i);
    for (bool backward : {false, true}) {
      const double s = prof.seconds(p, backward);
      if (s == 0.0) continue;
      out[fmt::format("{}_{}", lt::phase_name(p), backward ? "bwd" : "fwd")] =
          rounded(1e3 * s / static_cast<double>(steps), 3);
    }
  }
  return out;
}

// What a run measured, for its --json line.
struct RunSummary {
  double tokens_per_s = 0;
  std::int64_t measured_steps = 0;
  float last_loss = 0;
  std::optional<float> last_val;
  double unigram = 0;
};

// The --json line: bench/e2e/train and the tests read these names.
std::string summary_json(const cli::Options& o, const lt::Trainer& trainer, const RunSummary& r,
                         const lt::Profile& profile) {
  const lt::GptConfig& mc = o.train.model;
  nlohmann::ordered_json j = {
      {"tokens_per_s", rounded(r.tokens_per_s, 1)},
      {"steps", trainer.step_count()},
      {"measured_steps", r.measured_steps},
      {"batch", o.train.batch},
      {"context", mc.context},
      {"layers", mc.layers},
      {"channels", mc.channels},
      {"heads", mc.heads},
      {"params", lt::parameter_count(mc)},
      {"threads", lt::thread_count()},
      {"final_train_loss", rounded(r.last_loss, 5)},
      {"final_val_loss", r.last_val ? nlohmann::ordered_json(rounded(*r.last_val, 5)) : nullptr},
      {"unigram_entropy", rounded(r.unigram, 5)},
      {"breakdown_ms_per_step",
       breakdown_json(profile, r.measured_steps > 0 ? r.measured_steps : 1)},
  };
  return j.dump();
}

int run(const cli::Options& o) {
  lt::set_thread_count(o.threads);
  std::vector<std::string> data = o.data;
  if (data.empty()) {
    Result<std::string> stdlib = python_stdlib();
    if (!stdlib) {
      longhaul::log::error(kComponent, "{}", stdlib.status().to_string());
      return 1;
    }
    data.push_back(*stdlib);
  }
  Result<lt::Corpus> corpus = lt::build_corpus(data);
  if (!corpus) {
    longhaul::log::error(kComponent, "{}", corpus.status().to_string());
    return 1;
  }
  const double unigram = lt::unigram_cross_entropy(corpus->train, corpus->val);
  std::fprintf(stderr,
               "corpus: %zu files (%zu held out), train %.1f MB, val %.1f MB; unigram entropy of "
               "val %.4f nats/byte\n",
               corpus->files.size(), corpus->val_files,
               static_cast<double>(corpus->train.size()) / 1e6,
               static_cast<double>(corpus->val.size()) / 1e6, unigram);

  Result<lt::Trainer> made = lt::Trainer::create(o.train);
  if (!made) {
    longhaul::log::error(kComponent, "{}", made.status().to_string());
    return 1;
  }
  lt::Trainer& trainer = *made;
  if (!o.resume.empty()) {
    Status st = lt::load_checkpoint(o.resume, trainer);
    if (!st) {
      longhaul::log::error(kComponent, "{}", st.to_string());
      return 1;
    }
    std::fprintf(stderr, "resumed from %s at step %lld\n", o.resume.c_str(),
                 static_cast<long long>(trainer.step_count()));
  }
  const lt::GptConfig& mc = o.train.model;
  std::fprintf(stderr,
               "model: %zu parameters (layers %d, channels %d, heads %d, context %d); batch %d; "
               "%d threads\n",
               lt::parameter_count(mc), mc.layers, mc.channels, mc.heads, mc.context, o.train.batch,
               lt::thread_count());

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) {
    longhaul::log::error(kComponent, "cannot create {}: {}", o.out_dir, ec.message());
    return 1;
  }
  const std::string csv_path = o.out_dir + "/log.csv";
  const std::string ckpt_path = o.out_dir + "/checkpoint.bin";
  const bool append = !o.resume.empty() && fs::exists(csv_path);
  std::ofstream csv(csv_path, append ? std::ios::app : std::ios::trunc);
  if (!csv) {
    longhaul::log::error(kComponent, "cannot write {}", csv_path);
    return 1;
  }
  if (!append) csv << "step,lr,train_loss,val_loss,grad_norm,tokens_per_s,elapsed_s\n";

  lt::Profile profile;
  cli::Progress progress;
  cli::ProgressState ps;
  ps.total = o.steps;
  const double tokens_per_step = static_cast<double>(o.train.batch) * mc.context;
  double step_seconds = 0.0, measured_seconds = 0.0, elapsed = 0.0;
  std::int64_t measured_steps = 0, run_steps = 0;
  float last_loss = 0.0f;
  std::optional<float> last_val;
  const std::int64_t last_step = o.stop_at > 0 && o.stop_at < o.steps ? o.stop_at : o.steps;
  while (trainer.step_count() < last_step) {
    const bool measure = run_steps >= o.bench_warmup;
    trainer.model().set_profile(measure ? &profile : nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    Result<lt::StepStats> stats = trainer.step(corpus->train);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    trainer.model().set_profile(nullptr);
    if (!stats) {
      progress.finish();
      longhaul::log::error(kComponent, "step {}: {}", trainer.step_count(),
                           stats.status().to_string());
      return 1;
    }
    ++run_steps;
    step_seconds += dt;
    elapsed += dt;
    if (measure) {
      measured_seconds += dt;
      ++measured_steps;
    }
    last_loss = stats->loss;
    const std::int64_t step = trainer.step_count();
    std::optional<float> val;
    if (step % o.val_every == 0 || step == o.steps) {
      Result<float> v = trainer.evaluate(corpus->val, o.val_batches);
      if (!v) {
        progress.finish();
        longhaul::log::error(kComponent, "validation: {}", v.status().to_string());
        return 1;
      }
      val = *v;
      last_val = *v;
    }
    const double tps = tokens_per_step * static_cast<double>(run_steps) / step_seconds;
    csv << step << ',' << stats->lr << ',' << stats->loss << ','
        << (val ? fmt::format("{}", *val) : std::string()) << ',' << stats->grad_norm << ',' << tps
        << ',' << elapsed << '\n';
    ps.step = step;
    ps.loss = ps.loss == 0.0f ? stats->loss : 0.9f * ps.loss + 0.1f * stats->loss;
    ps.val_loss = last_val;
    ps.tokens_per_s = tps;
    ps.eta_s = static_cast<double>(o.steps - step) * step_seconds / static_cast<double>(run_steps);
    progress.update(ps);
    if (o.checkpoint_every > 0 && step % o.checkpoint_every == 0) {
      Status st = lt::save_checkpoint(ckpt_path, trainer);
      if (!st) longhaul::log::warn(kComponent, "checkpoint: {}", st.to_string());
    }
  }
  progress.finish();
  csv.flush();
  Status st = lt::save_checkpoint(ckpt_path, trainer);
  if (!st) {
    longhaul::log::error(kComponent, "{}", st.to_string());
    return 1;
  }
  const double lh_tps =
      measured_steps > 0 ? tokens_per_step * static_cast<double>(measured_steps) / measured_seconds
                         : 0.0;
  std::fprintf(stderr,
               "done: step %lld, train loss %.4f, val loss %s (unigram %.4f), %.0f tokens/s\n",
               static_cast<long long>(trainer.step_count()), last_loss,
               last_val ? fmt::format("{:.4f}", *last_val).c_str() : "-", unigram, lh_tps);
  std::fprintf(stderr, "wrote %s and %s\n", csv_path.c_str(), ckpt_path.c_str());
  if (o.profile && measured_steps > 0) {
    std::fprintf(stderr, "%s", breakdown_table(profile, measured_steps).c_str());
  }
  if (o.plot && run_steps > 0) {
    const std::string png = o.out_dir + "/loss.png";
    const std::string cmd =
        fmt::format("python3 '{}' '{}' '{}' --unigram {}", o.plot_script, csv_path, png, unigram);
    if (std::system(cmd.c_str()) == 0) {
      std::fprintf(stderr, "wrote %s\n", png.c_str());
    } else {
      longhaul::log::warn(kComponent, "plotting failed ({}); the CSV is complete", cmd);
    }
  }
  if (o.json) {
    const RunSummary summary{lh_tps, measured_steps, last_loss, last_val, unigram};
    std::printf("%s\n", summary_json(o, trainer, summary, profile).c_str());
  }
  return 0;
}

// Waiting threads must sleep, not spin (design principle 4): a spinning OpenMP barrier burns the
// CPU that other work on the machine (the peer's network and hashing threads, other processes)
// needs, and on a busy machine it stalls every kernel behind a descheduled thread; measured
// here, 2 threads on a loaded 2-core machine ran 2.6-5.0k tokens/s spinning, 9.3-9.5k passive.
// libgomp reads OMP_WAIT_POLICY once, before main(), so the trainer re-executes itself with the
// policy set, unless the user chose one.
void ensure_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the default policy.
}

}  // namespace

int main(int argc, char** argv) {
  ensure_passive_omp_wait(argv);
  cli::Options options;
  if (auto exit_status = cli::parse(argc, argv, &options)) return *exit_status;
  return run(options);
}
