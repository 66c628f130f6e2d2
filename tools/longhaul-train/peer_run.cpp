#include "peer_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "common/log.hpp"
#include "progress.hpp"
#include "run_setup.hpp"
#include "sync_method.hpp"
#include "timeline.hpp"
#include "train/checkpoint.hpp"
#include "train/param_layout.hpp"
#include "train/threads.hpp"

namespace longhaul::train::cli {
namespace {

constexpr std::string_view kComponent = "train";

// Everything the loop works with, and its running totals.
struct PeerLoop {
  PeerLoop(const Options& options, Trainer& t, const RunData& d,
           const std::vector<std::uint8_t>& own_shard, CsvLog& log, Timeline& tl, PeerGroup& g,
           SyncMethod& m, Timeline::Clock::time_point start)
      : o(options),
        trainer(t),
        data(d),
        shard(own_shard),
        csv(log),
        timeline(tl),
        group(g),
        method(m),
        origin(start) {}

  const Options& o;
  Trainer& trainer;
  const RunData& data;
  const std::vector<std::uint8_t>& shard;
  CsvLog& csv;
  Timeline& timeline;
  PeerGroup& group;
  SyncMethod& method;
  const Timeline::Clock::time_point origin;  // the timeline's times are seconds since it
  std::optional<lh_sync_stats> engine;       // the engine's figures after the last step
  BlockedWindow window;
  std::optional<Trainer> evaluator;  // a copy of the model that theta_g is evaluated on
  Progress progress;
  ProgressState ps;
  double step_seconds = 0, measured_seconds = 0;
  std::int64_t run_steps = 0, measured_steps = 0;
  float last_loss = 0;
  std::optional<float> last_val;
  bool closed = false, checkpoint_failed = false;

  std::int64_t last_step() const {
    return o.stop_at > 0 && o.stop_at < o.steps ? o.stop_at : o.steps;
  }
  double tokens_per_step() const {
    return static_cast<double>(o.train.batch) * o.train.model.context;
  }
  Status step();
  Result<StepStats> timed_step();
  Status print_theta();
  Status end_of_run(bool periodic_checkpoint);
  Result<float> validate();
  Status checkpoint();
  PeerCounters peer_counters();
  void report(const StepStats& stats, std::optional<float> val);
};

// The method's step, timed for the totals, the progress line's window and the timeline.
Result<StepStats> PeerLoop::timed_step() {
  const std::uint64_t blocked_before = method.counters().blocked_ns;
  const auto t0 = Timeline::Clock::now();
  Result<StepStats> stats = method.step(trainer, shard);
  const double dt = std::chrono::duration<double>(Timeline::Clock::now() - t0).count();
  if (!stats) return stats;
  const double blocked = static_cast<double>(method.counters().blocked_ns - blocked_before) / 1e9;
  const bool measured = run_steps++ >= o.bench_warmup;
  step_seconds += dt;
  if (measured) {
    measured_seconds += dt;
    ++measured_steps;
  }
  window.add(dt, blocked);
  engine = method.engine_stats();
  timeline.record(
      {trainer.step_count(), std::chrono::duration<double>(t0 - origin).count(), dt, blocked},
      engine);
  return stats;
}

Status PeerLoop::step() {
  Result<StepStats> stats = timed_step();
  if (!stats) return stats.status();
  last_loss = stats->loss;
  LH_RETURN_IF_ERROR(print_theta());
  const std::int64_t s = trainer.step_count();
  const bool done = s >= last_step() || stop_requested();
  std::optional<float> val;
  if (done) {
    // The last step: checkpoint where the step left the engine, settle with the group, and
    // validate the theta_g everyone ends with.
    LH_RETURN_IF_ERROR(end_of_run(true));
    val = last_val;
  } else {
    if (o.checkpoint_every > 0 && s % o.checkpoint_every == 0) LH_RETURN_IF_ERROR(checkpoint());
    if (s % o.val_every == 0) {
      Result<float> v = validate();
      if (!v) return v.status();
      val = last_val = *v;
      if (o.peer.theta_every > 0) print_event(val_event(s, *v));
    }
  }
  report(*stats, val);
  return Status::ok();
}

// --theta-every: the hash of the state the group shares after this step. Before a last step's
// close: a peer stopped by SIGTERM closes (settling a round in flight) steps before the others.
Status PeerLoop::print_theta() {
  const std::int64_t s = trainer.step_count();
  if (o.peer.theta_every <= 0 || s % o.peer.theta_every != 0) return Status::ok();
  Result<std::uint64_t> hash = method.state_hash(trainer);
  if (!hash) return hash.status();
  print_event(theta_event(s, *hash, group.attribute(LH_ATTR_GROUP_WORLD_SIZE),
                          group.attribute(LH_ATTR_EPOCH), method.counters().rounds_applied));
  return Status::ok();
}

Status PeerLoop::end_of_run(bool save) {
  if (save) LH_RETURN_IF_ERROR(checkpoint());
  closed = true;
  LH_RETURN_IF_ERROR(method.close());
  timeline.finish(trainer.step_count(), method.engine_stats());
  timeline.flush();
  Result<float> v = validate();
  if (!v) return v.status();
  last_val = *v;
  return Status::ok();
}

// The validation loss of theta_g (in data-parallel training, the parameters themselves).
Result<float> PeerLoop::validate() {
  if (!evaluator) {
    Result<Trainer> made = Trainer::create(o.train);
    if (!made) return made.status();
    evaluator.emplace(std::move(*made));
  }
  LH_RETURN_IF_ERROR(method.global_parameters(trainer, evaluator->model().params()));
  Result<float> v = evaluator->evaluate(data.corpus.val, o.val_batches);
  if (!v) return v.status().with_context("validation");
  return v;
}

// The trainer's checkpoint and the method's state, each written atomically; a failure is a
// warning (the run goes on) and makes the exit status 1.
Status PeerLoop::checkpoint() {
  const RunFiles files = RunFiles::in(o.out_dir);
  Status st = save_checkpoint(files.checkpoint, trainer);
  if (st) st = method.save(files);
  if (!st) {
    checkpoint_failed = true;
    log::warn(kComponent, "checkpoint at step {}: {}", trainer.step_count(), st.to_string());
  }
  return Status::ok();
}

PeerCounters PeerLoop::peer_counters() {
  return {group.attribute(LH_ATTR_GROUP_WORLD_SIZE), group.traffic(),
          static_cast<double>(method.counters().blocked_ns) / 1e9};
}

void PeerLoop::report(const StepStats& stats, std::optional<float> val) {
  const std::int64_t s = trainer.step_count();
  const double tps = tokens_per_step() * static_cast<double>(run_steps) / step_seconds;
  const PeerCounters pc = peer_counters();
  csv.write({s, stats.lr, stats.loss, val, stats.grad_norm, tps, step_seconds, pc});
  ps.step = s;
  ps.loss = ps.loss == 0.0f ? stats.loss : 0.9f * ps.loss + 0.1f * stats.loss;
  ps.val_loss = last_val;
  ps.tokens_per_s = tps;
  ps.eta_s = static_cast<double>(last_step() - s) * step_seconds / static_cast<double>(run_steps);
  const lh_traffic& t = pc.traffic;
  ps.sent_bytes = static_cast<double>(t.data_sent + t.control_sent + t.state_sent);
  ps.blocked_s = pc.blocked_s;
  ps.blocked_fraction = window.fraction();
  if (engine)
    ps.overlap = ProgressState::Overlap{engine->delay, engine->delay_needed,
                                        static_cast<double>(engine->sync_time_ns) / 1e9,
                                        static_cast<double>(engine->step_time_ns) / 1e9};
  progress.update(ps);
}

// The summary line on stderr and the --json line on stdout.
Status summarize(PeerLoop& loop) {
  const Options& o = loop.o;
  PeerSummary s;
  s.run.tokens_per_s = loop.measured_steps > 0
                           ? loop.tokens_per_step() * static_cast<double>(loop.measured_steps) /
                                 loop.measured_seconds
                           : 0.0;
  s.run.steps = loop.trainer.step_count();
  s.run.measured_steps = loop.measured_steps;
  s.run.last_loss = loop.last_loss;
  s.run.last_val = loop.last_val;
  s.run.unigram = loop.data.unigram;
  s.peer_id = loop.group.attribute(LH_ATTR_PEER_ID);
  s.world = loop.group.attribute(LH_ATTR_GROUP_WORLD_SIZE);
  s.stopped = stop_requested();
  s.elapsed_s = loop.step_seconds;
  s.traffic = loop.group.traffic();
  const SyncCounters c = loop.method.counters();
  s.peak_event_bytes = c.peak_event_bytes;
  s.blocked_s = static_cast<double>(c.blocked_ns) / 1e9;
  s.rounds_applied = c.rounds_applied;
  s.rounds_dropped = c.rounds_dropped;
  s.rounds_late = c.rounds_late;
  s.retries = c.retries;
  s.sparse_encoded_bytes = c.sparse_encoded_bytes;
  Result<std::uint64_t> hash = loop.method.state_hash(loop.trainer);
  if (!hash) return hash.status();
  s.state_hash = *hash;
  const lh_traffic& t = s.traffic;
  std::fprintf(stderr,
               "done: step %lld, train loss %.4f, val loss of theta_g %s (unigram %.4f), %.0f "
               "tokens/s, sent %llu bytes, blocked %.2f s, state %016llx\n",
               static_cast<long long>(s.run.steps), s.run.last_loss,
               s.run.last_val ? fmt::format("{:.4f}", *s.run.last_val).c_str() : "-", s.run.unigram,
               s.run.tokens_per_s,
               static_cast<unsigned long long>(t.data_sent + t.control_sent + t.state_sent),
               s.blocked_s, static_cast<unsigned long long>(s.state_hash));
  if (o.plot && loop.run_steps > 0) {
    plot_loss(o, RunFiles::in(o.out_dir).csv, s.run.unigram);
    plot_timeline(o.timeline_script, o.out_dir);
  }
  if (o.json) std::printf("%s\n", peer_summary_json(o, s).c_str());
  return Status::ok();
}

// The steps between two of the method's rounds: one all-reduce per step (dp), or a fragment's
// round every H / F steps (the engine's methods), for the supervisor's progress bound.
std::int64_t round_every(const PeerOptions& p) {
  if (p.method == Method::kDataParallel) return 1;
  return std::max<std::int64_t>(1,
                                p.sync.sync_every / std::max<std::uint32_t>(1, p.sync.fragments));
}

// From the start collective to the summary; the caller leaves the group.
Status train(PeerLoop& loop) {
  LH_RETURN_IF_ERROR(loop.method.start(loop.trainer));
  loop.timeline.begin(loop.method.engine_stats());
  if (loop.o.peer.theta_every > 0)
    print_event(joined_event(loop.group.attribute(LH_ATTR_PEER_ID),
                             loop.group.attribute(LH_ATTR_EPOCH),
                             loop.group.attribute(LH_ATTR_GROUP_WORLD_SIZE),
                             loop.trainer.step_count(), round_every(loop.o.peer)));
  loop.ps.total = loop.last_step();
  while (!loop.closed && loop.trainer.step_count() < loop.last_step() && !stop_requested()) {
    Status s = loop.step();
    if (!s) {
      loop.progress.finish();
      return s;
    }
  }
  loop.progress.finish();
  loop.csv.flush();
  // Stopped before a step, or started at the end: settle and validate all the same.
  if (!loop.closed) LH_RETURN_IF_ERROR(loop.end_of_run(false));
  return summarize(loop);
}

}  // namespace

int run_peer(const Options& o) {
  install_stop_handler();
  set_thread_count(o.threads);
  const auto fail = [](const Status& st) {
    log::error(kComponent, "{}", st.to_string());
    return 1;
  };
  Result<RunData> data = load_data(o);
  if (!data) return fail(data.status());
  Result<Trainer> trainer = make_trainer(o);
  if (!trainer) return fail(trainer.status());
  Result<CsvLog> csv = open_output(o, /*peer_columns=*/true);
  if (!csv) return fail(csv.status());
  const auto origin = Timeline::Clock::now();
  const bool engine = o.peer.method != Method::kDataParallel;
  Result<Timeline> timeline =
      Timeline::open(o.out_dir, /*append=*/!o.resume.empty(),
                     engine ? std::optional(o.peer.sync.fragments) : std::nullopt, origin);
  if (!timeline) return fail(timeline.status());
  Result<std::unique_ptr<PeerGroup>> group = PeerGroup::join(o.peer);
  if (!group) return fail(group.status());
  const std::vector<std::uint8_t> shard =
      take_shard(data->corpus.train, o.peer.peers, o.peer.peer_index);
  std::unique_ptr<SyncMethod> method =
      engine ? make_engine_method(o, **group) : make_data_parallel(o, **group);
  PeerLoop loop(o, *trainer, *data, shard, *csv, *timeline, **group, *method, origin);
  if (Status st = train(loop); !st) return fail(st);
  if (Status left = (*group)->leave(stop_requested() ? "stopped by a signal" : "done"); !left)
    log::warn(kComponent, "{}", left.to_string());
  return loop.checkpoint_failed ? 1 : 0;
}

}  // namespace longhaul::train::cli
