#include "sync/engine.hpp"

#include <fmt/format.h>

#include "sync/round.hpp"

namespace longhaul::sync {

using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<SyncEngine>> SyncEngine::start(const EngineServices& services,
                                                      EngineOptions options) {
  if (!services.group || !services.collectives || !services.state_sync || !services.workers)
    return invalid_argument("the sync engine needs a group, collectives, a state sync and workers");
  LH_RETURN_IF_ERROR(validate(options));
  auto layout =
      Layout::make(options.ranges, options.pieces, options.fragments, options.device_copies);
  if (!layout) return layout.status();
  auto schedule = FragmentSchedule::make(options.sync_every, options.fragments, options.delay);
  if (!schedule) return schedule.status();
  if (Status s = services.group->failure(); !s) return s;
  std::unique_ptr<SyncEngine> engine(
      new SyncEngine(services, std::move(options), std::move(*layout), *schedule));
  if (engine->sparse()) {
    auto encoder = SparseEncoder::make(engine->layout_, sparse_params(engine->options_.sparse));
    if (!encoder) return encoder.status();
    engine->sparse_ = std::move(*encoder);
    MutexLock lock(engine->stats_mu_);
    engine->stats_.memory_bytes += engine->sparse_.bytes();
  }
  const auto t0 = Clock::now();
  // Until the group's θ_g is known, this peer's own parameters are its vote for it.
  for (size_t f = 0; f < engine->layout_.fragments(); ++f)
    LH_RETURN_IF_ERROR(engine->layout_.read(f, engine->state_.theta_g(f), engine->workers_));
  if (engine->options_.resume_path.empty()) {
    LH_RETURN_IF_ERROR(engine->join_group());
  } else {
    auto checkpoint = read_checkpoint(engine->options_.resume_path);
    if (!checkpoint) return checkpoint.status();
    LH_RETURN_IF_ERROR(engine->resume_group(*checkpoint));
  }
  MutexLock lock(engine->stats_mu_);
  engine->stats_.blocked += Clock::now() - t0;
  engine->stats_.steps = engine->state_.step();
  engine->publish_overlap();
  return engine;
}

SyncEngine::SyncEngine(const EngineServices& services, EngineOptions options, Layout layout,
                       FragmentSchedule schedule)
    : group_(*services.group),
      collectives_(*services.collectives),
      state_sync_(*services.state_sync),
      workers_(*services.workers),
      stats_board_(services.stats_board),
      options_(std::move(options)),
      layout_(std::move(layout)),
      schedule_(schedule),
      state_(layout_, config_tag(options_, layout_), options_.delay, options_.adaptive_delay),
      staging_(layout_.largest_fragment(), 0.0f),
      last_reset_(layout_.fragments(), 0),
      deadline_window_(options_.deadline),
      traffic_at_start_(collectives_.traffic()) {
  if (options_.method == Method::kEager) eager_deviation_.assign(layout_.fragment_size(0), 0.0f);
  stats_.memory_bytes = state_.bytes() +
                        (staging_.size() + eager_deviation_.size()) * sizeof(float) +
                        layout_.mirror_bytes();
}

SyncEngine::~SyncEngine() {
  // A round still in flight writes into staging_: end it before the buffer goes.
  if (!in_flight_) return;
  const Status why = closed_error("the sync engine was destroyed");
  for (auto* op : {in_flight_->mask_op.get(), in_flight_->delta_op.get()})
    if (op) {
      op->abort(why);
      (void)op->wait();
    }
  // A sparse round reads this peer's encoding: its destructor waits for both steps (and numbers
  // the second where the others do, failed, if it never started).
  if (in_flight_->gather) in_flight_->gather->abort(why);
  in_flight_.reset();
}

Status SyncEngine::step() {
  if (closed_) return closed_error("the sync engine was closed");
  const auto t0 = Clock::now();
  step_clock_.enter(t0);
  if (in_flight_) {
    start_contributions(*in_flight_, /*wait=*/false);
    poll(*in_flight_, t0);
  }
  const uint64_t t = ++state_.step();
  Status s = run_step(t);
  peer::EngineFigures figures;
  const auto t1 = Clock::now();
  step_clock_.leave(t1);
  {
    MutexLock lock(stats_mu_);
    stats_.blocked += t1 - t0;
    stats_.steps = t;
    publish_overlap();
    figures.inner_steps = t;
    figures.outer_rounds = stats_.rounds_applied;
    figures.rounds_dropped = stats_.rounds_dropped;
    if (stats_.last_round) {
      figures.last_round_participants = stats_.last_round->participants;
      figures.last_round_bytes = stats_.last_round->event_bytes;
    }
    figures.blocked_ns = static_cast<uint64_t>(stats_.blocked.count());
    figures.delay = stats_.delay;
    figures.delay_needed = stats_.delay_needed;
    figures.delay_changes = stats_.delay_changes;
    figures.sync_time_ns = static_cast<uint64_t>(stats_.sync_time.count());
    figures.step_time_ns = static_cast<uint64_t>(stats_.step_time.count());
  }
  // For the master's status page (PEER_STATS).
  if (stats_board_) stats_board_->set_engine(figures);
  return s;
}

// One step's phases: the rounds due are applied, τ chosen and joiners admitted at a cycle's start,
// new rounds launched. Applying before launching lets a fragment start its next round at the step
// that finished the last one.
Status SyncEngine::run_step(uint64_t t) {
  if (delayed()) {
    // CO2 and eager: the round launched H steps ago is applied where the next one is formed.
    if (schedule_.round_launched(t, 0)) {
      if (in_flight_)
        LH_RETURN_IF_ERROR(finish_round());
      else
        LH_RETURN_IF_ERROR(apply_delayed(0, {}, /*restart=*/true));
    }
  } else if (in_flight_ && in_flight_->delay > 0 && t == in_flight_->apply_step) {
    LH_RETURN_IF_ERROR(finish_round());
  }
  if (schedule_.admits(t)) {
    // A new cycle of H steps: its τ is chosen before a joiner downloads the shared state.
    resize_overlap();
    LH_RETURN_IF_ERROR(admit());
  }
  return launch_due(t);
}

Status SyncEngine::launch_due(uint64_t t) {
  for (uint32_t f = 0; f < layout_.fragments(); ++f) {
    const uint64_t round = schedule_.round_launched(t, f);
    if (round == 0) continue;
    LH_RETURN_IF_ERROR(launch(f, round));
    if (!delayed() && in_flight_->delay == 0) LH_RETURN_IF_ERROR(finish_round());
  }
  return Status::ok();
}

Status SyncEngine::close() {
  if (closed_) return Status::ok();
  closed_ = true;
  if (!in_flight_) return Status::ok();
  const auto t0 = Clock::now();
  Status s = finish_round(/*restart=*/false);
  MutexLock lock(stats_mu_);
  stats_.blocked += Clock::now() - t0;
  stats_.in_flight.reset();
  return s;
}

void SyncEngine::record(const RoundReport& report) {
  MutexLock lock(stats_mu_);
  (report.applied ? stats_.rounds_applied : stats_.rounds_dropped)++;
  if (report.late) ++stats_.rounds_late;
  stats_.deadline = report.deadline;
  stats_.non_finite_excluded += report.non_finite_peers.size();
  stats_.malformed_excluded += report.malformed_peers.size();
  stats_.sparse_encoded_bytes += report.encoded_bytes;
  stats_.peak_event_bytes = std::max(stats_.peak_event_bytes, report.event_bytes);
  stats_.last_round = report;
}

EngineStats SyncEngine::stats() const {
  const peer::TrafficTotals now = collectives_.traffic();
  MutexLock lock(stats_mu_);
  EngineStats s = stats_;
  s.traffic.data_sent = now.data_sent - traffic_at_start_.data_sent;
  s.traffic.data_received = now.data_received - traffic_at_start_.data_received;
  s.traffic.control_sent = now.control_sent - traffic_at_start_.control_sent;
  s.traffic.control_received = now.control_received - traffic_at_start_.control_received;
  s.traffic.state_sent = now.state_sent - traffic_at_start_.state_sent;
  s.traffic.state_received = now.state_received - traffic_at_start_.state_received;
  return s;
}

uint64_t SyncEngine::state_hash() {
  return state_.registry().hash(workers_);
}

}  // namespace longhaul::sync
