// The engine's overlap (docs/overlap.md): when each round's result is ready here, what this peer
// reports about it in the next round's masks, what the group's reports add up to, and τ at the
// start of each cycle of H steps.
#include <algorithm>

#include "common/log.hpp"
#include "sync/engine.hpp"
#include "sync/round.hpp"

namespace longhaul::sync {

using Clock = std::chrono::steady_clock;

// At the start of every step: a round whose operations have completed since the last poll was
// ready somewhere between the two polls; midway is the estimate with no bias either way.
void SyncEngine::poll(Round& round, Clock::time_point now) {
  if (round.ready || round.launched_at == Clock::time_point{}) return;
  const bool delta_done = round.delta_op
                              ? round.delta_op->test()
                              : round.gather && round.data_started && round.gather->test();
  const bool done = delta_done && round.mask_op && round.mask_op->test();
  if (!done) {
    round.pending_at = now;
    return;
  }
  mark_ready(round, round.pending_at + (now - round.pending_at) / 2);
}

void SyncEngine::mark_ready(Round& round, Clock::time_point at) {
  round.ready = true;
  round.ready_at = at;
}

// The masks' tail: the members' reports about the rounds they finished before this one.
std::span<float> SyncEngine::reports_of(Round& round) const {
  const size_t contribution = 2 * round.members;
  if (round.masks.size() != contribution + kOverlapSlots * round.members) return {};
  return std::span(round.masks).subspan(contribution);
}

// An applied round's reports are the same on every member: the most steps any member needed
// joins the cycle's figure in the shared state, and the fastest member's sync time the window an
// adaptive deadline follows (read whether τ and the deadline are adaptive or not: every round's
// masks carry the reports, start_ops).
void SyncEngine::take_reports(Round& round) {
  const auto section = reports_of(round);
  if (section.empty()) return;  // a round read from a checkpoint of version 3
  const GroupReport group = read_reports(section);
  deadline_window_.add(group.fastest_sync_ms);
  state_.steps_needed() = std::max<uint64_t>(state_.steps_needed(), group.steps_needed);
  if (group.slowest_sync_ms <= 0.0f) return;
  MutexLock lock(stats_mu_);
  stats_.slowest_sync = std::chrono::nanoseconds(
      static_cast<int64_t>(static_cast<double>(group.slowest_sync_ms) * 1e6));
}

// This peer's own measurement of a round the group applied, to report in its next launch.
void SyncEngine::measure(const Round& round) {
  if (!round.ready || round.launched_at == Clock::time_point{}) return;
  const auto sync =
      std::chrono::duration_cast<std::chrono::nanoseconds>(round.ready_at - round.launched_at);
  unsent_report_.steps_needed = steps_needed(sync, step_clock_.step(), options_.overlap_margin);
  unsent_report_.sync_ms = static_cast<float>(static_cast<double>(sync.count()) / 1e6);
  MutexLock lock(stats_mu_);
  stats_.sync_time = sync;
}

uint32_t SyncEngine::delay_cap() const {
  return std::min(options_.max_staleness_steps, schedule_.delay_bound());
}

// At every admission point (a multiple of H, no round in flight, before the joiners download the
// shared state): the cycle that ends hands its τ and its reports to the next. Every member holds
// the same reports, so every member chooses the same τ, from the same step on.
void SyncEngine::resize_overlap() {
  const auto needed = static_cast<uint32_t>(std::min<uint64_t>(state_.steps_needed(), UINT32_MAX));
  const auto current = static_cast<uint32_t>(state_.delay());
  const uint32_t next =
      options_.adaptive_delay ? next_delay(needed, current, delay_cap()) : current;
  state_.previous_delay() = current;
  state_.delay() = next;
  state_.steps_needed() = 0;
  if (next != current)
    log::debug("sync", "step {}: tau {} -> {} (the slowest member needed {} steps)", state_.step(),
               current, next, needed);
  MutexLock lock(stats_mu_);
  stats_.delay_needed = needed;
  if (next != current) ++stats_.delay_changes;
}

void SyncEngine::publish_overlap() {
  stats_.delay = static_cast<uint32_t>(state_.delay());
  stats_.step_time = step_clock_.step();
  stats_.in_flight.reset();
  if (!in_flight_) return;
  const Round& r = *in_flight_;
  stats_.in_flight =
      InFlightRound{r.fragment, r.number, r.apply_step, r.launched_at, r.ready, r.ready_at};
}

}  // namespace longhaul::sync
