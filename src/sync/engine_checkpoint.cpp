// The engine's checkpoints: what a peer writes beside the trainer's checkpoint and reads back to
// continue exactly (checkpoint.hpp).
#include <algorithm>

#include <fmt/format.h>

#include "sync/engine.hpp"
#include "sync/round.hpp"

namespace longhaul::sync {

Status SyncEngine::save(const std::string& path) {
  if (closed_) return closed_error("the sync engine was closed");
  if (in_flight_) LH_RETURN_IF_ERROR(settle_ahead(*in_flight_));
  return write_checkpoint(path, snapshot());
}

EngineCheckpoint SyncEngine::snapshot() const {
  EngineCheckpoint c;
  c.config = config_tag(options_, layout_);
  auto& state = const_cast<SharedState&>(state_);
  for (size_t i = 0; i <= layout_.fragments(); ++i)
    c.counters.push_back(i == 0 ? state.step() : state.rounds(i - 1));
  c.overlap = {state.delay(), state.previous_delay(), state.steps_needed()};
  for (size_t f = 0; f < layout_.fragments(); ++f) {
    c.theta_g.emplace_back(state.theta_g(f).begin(), state.theta_g(f).end());
    c.momentum.emplace_back(state.momentum(f).begin(), state.momentum(f).end());
  }
  c.last_reset = last_reset_;
  c.eager_state = eager_deviation_;
  c.staged_code = static_cast<int32_t>(staged_code_);
  c.staged_finite = staged_finite_;
  // The staging buffer holds the delayed methods' next Δ even with no round in flight.
  c.staging.assign(staging_.begin(), staging_.end());
  // Settled first (save): no encoding is pending, the residual is the round's outcome's.
  c.residual = sparse_.residual();
  if (!in_flight_) return c;
  const Round& r = *in_flight_;
  c.in_flight = true;
  c.fragment = r.fragment;
  c.number = r.number;
  c.attempts = r.attempts;
  c.late = r.late;
  c.applied = r.decided_apply;
  c.masks = r.masks;
  c.ring = r.ring;
  return c;
}

Status SyncEngine::restore(const EngineCheckpoint& c) {
  const std::string config = config_tag(options_, layout_);
  const auto mismatch = [&](const std::string& why) {
    return Status(LH_ERR_STATE_MISMATCH,
                  fmt::format("the engine checkpoint {} does not fit this engine: {}",
                              options_.resume_path, why));
  };
  if (c.config != config)
    return mismatch(fmt::format("configured as {}, this engine as {}", c.config, config));
  if (c.counters.size() != 1 + layout_.fragments() || c.last_reset.size() != layout_.fragments() ||
      c.eager_state.size() != eager_deviation_.size() || c.staging.size() != staging_.size() ||
      (c.in_flight && c.fragment >= layout_.fragments()) ||
      (!c.overlap.empty() && c.overlap.size() != 3) ||
      c.residual.size() != sparse_.residual().size())
    return mismatch(fmt::format(
        "its sizes differ (counters {}, resets {}, eager state {}, staging {}, residual {}; this "
        "engine's {}, {}, {}, {}, {})",
        c.counters.size(), c.last_reset.size(), c.eager_state.size(), c.staging.size(),
        c.residual.size(), 1 + layout_.fragments(), layout_.fragments(), eager_deviation_.size(),
        staging_.size(), sparse_.residual().size()));
  // A file written before τ could change holds none: the configured τ, throughout.
  const std::vector<uint64_t> overlap =
      c.overlap.empty() ? std::vector<uint64_t>{options_.delay, options_.delay, 0} : c.overlap;
  if (std::max(overlap[0], overlap[1]) > schedule_.delay_bound())
    return mismatch(fmt::format(
        "its tau ({}, {} the cycle before) exceeds H = {}, F = {}'s bound {}", overlap[0],
        overlap[1], options_.sync_every, options_.fragments, schedule_.delay_bound()));
  state_.step() = c.counters[0];
  state_.delay() = overlap[0];
  state_.previous_delay() = overlap[1];
  state_.steps_needed() = overlap[2];
  for (size_t f = 0; f < layout_.fragments(); ++f) {
    state_.rounds(f) = c.counters[1 + f];
    std::copy(c.theta_g[f].begin(), c.theta_g[f].end(), state_.theta_g(f).begin());
    std::copy(c.momentum[f].begin(), c.momentum[f].end(), state_.momentum(f).begin());
  }
  last_reset_ = c.last_reset;
  eager_deviation_ = c.eager_state;
  staged_code_ = static_cast<Contribution>(c.staged_code);
  staged_finite_ = c.staged_finite;
  std::copy(c.staging.begin(), c.staging.end(), staging_.begin());
  sparse_.residual() = c.residual;
  if (!c.in_flight) return Status::ok();
  auto round = std::make_unique<Round>();
  round->fragment = c.fragment;
  round->number = c.number;
  round->delta = {staging_.data(), layout_.fragment_size(c.fragment)};
  round->masks = c.masks;
  round->ring = c.ring;
  round->members = c.ring.size();
  round->delay = static_cast<uint32_t>(state_.delay());  // launched in this cycle
  round->apply_step = schedule_.launch_step(c.fragment, c.number) + round->delay;
  round->attempts = c.attempts;
  round->late = c.late;
  round->settled = true;
  round->decided_apply = c.applied;
  in_flight_ = std::move(round);
  return Status::ok();
}

}  // namespace longhaul::sync
