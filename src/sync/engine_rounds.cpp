// The engine's rounds: forming a fragment's pseudo-gradient, launching its all-reduce and the
// contribution masks', settling the round with the group (the master decides), and applying it.
#include <algorithm>
#include <atomic>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.hpp"
#include "sync/engine.hpp"
#include "sync/outer_rules.hpp"
#include "sync/round.hpp"

namespace longhaul::sync {

using Clock = std::chrono::steady_clock;

namespace {
constexpr size_t kChunk = 1 << 16;  // elements per parallel task of an outer step
}  // namespace

uint32_t SyncEngine::round_identity(const Round& round) const {
  return static_cast<uint32_t>((round.number * layout_.fragments() + round.fragment) &
                               kRoundIdentityMask);
}

bool SyncEngine::contributes(uint32_t f) const {
  // A whole round of this peer's own training since θ_local was last set from θ_g: what every
  // member has between two rounds (H − τ steps, τ of the cycle before: the previous round of the
  // fragment was launched there); a joiner's first, shorter one would pull the mean towards θ_g.
  return state_.step() - last_reset_[f] >= options_.sync_every - state_.previous_delay();
}

Status SyncEngine::form_delta(uint32_t f, bool full_round) {
  const std::span<float> delta(staging_.data(), layout_.fragment_size(f));
  LH_RETURN_IF_ERROR(layout_.read(f, delta, workers_));
  staged_finite_ = sync::form_delta(state_.theta_g(f), delta, workers_);
  staged_code_ = !full_round       ? Contribution::kNone
                 : !staged_finite_ ? Contribution::kNonFinite
                                   : Contribution::kCounted;
  if (staged_code_ == Contribution::kNone) std::fill(delta.begin(), delta.end(), 0.0f);
  if (sparse()) encode_staged(f);
  return Status::ok();
}

Status SyncEngine::start_ops(Round& round) {
  const collective::RingView view = collectives_.ring_view();
  round.gather.reset();  // a retry's: the last attempt's completed in its wait
  round.data_started = false;
  round.ring = ring_ids();
  round.members = view.size;
  round.masks = contribution_mask(view.size, view.rank, staged_code_, round_identity(round),
                                  group_.peers_pending());
  // Beside the contribution masks: this peer's report about the last round it finished.
  round.masks.resize(round.masks.size() + kOverlapSlots * view.size, 0.0f);
  write_report(std::span(round.masks).subspan(2 * view.size), view.rank, round.report);
  round.launched_at = round.pending_at = Clock::now();
  round.ready = false;
  if (round.attempts++ == 0) round.traffic_at_launch = collectives_.traffic();
  collective::AllReduceSpec masks;
  masks.input = masks.output = round.masks.data();
  masks.count = round.masks.size();
  auto mask_op = collectives_.allreduce(masks);
  if (!mask_op) return mask_op.status();
  round.mask_op = *mask_op;
  if (sparse()) return start_sparse(round, view);
  collective::AllReduceSpec delta;
  delta.input = delta.output = round.delta.data();
  delta.count = round.delta.size();
  delta.codec = options_.codec;
  delta.block = options_.block;
  auto delta_op = collectives_.allreduce(delta);
  if (!delta_op) return delta_op.status();
  round.delta_op = *delta_op;
  return Status::ok();
}

Status SyncEngine::launch(uint32_t f, uint64_t number) {
  auto round = std::make_unique<Round>();
  round->fragment = f;
  round->number = number;
  round->delta = {staging_.data(), layout_.fragment_size(f)};
  round->delay = static_cast<uint32_t>(state_.delay());
  round->apply_step = state_.step() + round->delay;
  round->report = unsent_report_;
  unsent_report_ = {};  // reported once, in this round (and its retries)
  if (!delayed()) LH_RETURN_IF_ERROR(form_delta(f, contributes(f)));
  // A launch the engine refuses (the epoch was aborted meanwhile) is settled like any failure.
  round->launch_failure = start_ops(*round);
  in_flight_ = std::move(round);
  return Status::ok();
}

std::chrono::milliseconds SyncEngine::round_deadline() const {
  return options_.adaptive_deadline ? deadline_window_.deadline() : options_.deadline;
}

// Waits for the round's operations (until its deadline, if one is set); this peer's outcome.
Status SyncEngine::wait_for(Round& round) {
  if (!round.launch_failure.is_ok()) {
    for (auto* op : {round.mask_op.get(), round.delta_op.get()})
      if (op) op->abort(round.launch_failure);
    if (round.gather) round.gather->abort(round.launch_failure);
  }
  if (const auto limit = round_deadline(); limit.count() > 0) {
    const auto deadline = round.launched_at + limit;
    for (auto* op : {round.mask_op.get(), round.delta_op.get()})
      if (op && !op->wait_until(deadline)) {
        round.late = true;
        op->abort(timeout_error("the round's deadline passed"));
      }
    if (round.gather) wait_sparse_until(round, deadline);
  }
  poll(round, Clock::now());  // a result that was already there is dated by the polls
  Status outcome = round.launch_failure;
  for (auto* op : {round.mask_op.get(), round.delta_op.get()}) {
    const Status s = op ? op->wait() : Status::ok();
    if (outcome.is_ok() && !s.is_ok()) outcome = s;
  }
  if (const Status s = finish_gather(round); outcome.is_ok() && !s.is_ok()) outcome = s;
  if (!round.ready) mark_ready(round, Clock::now());  // this peer waited for it
  return outcome;
}

// Settles the round with the group (peer/settle.hpp): every peer reports its outcome and the
// master decides for all, so no peer applies a round another one dropped. A failed round is
// retried over the survivors when a peer was lost (and the policy and method allow it), else
// dropped; either way the failed epoch is re-formed before the next collective. The rails of a
// node re-form together (docs/protocol.md, "Node agreement").
Status SyncEngine::settle(Round& round, bool* applied) {
  peer::SettleSteps steps;
  steps.attempt = [&](uint32_t n) { return attempt(round, n); };
  steps.late = [&] { return round.late; };
  const peer::SettlePolicy policy = round_policy();
  auto settled = peer::settle(group_, steps, policy);
  if (!settled) return settled.status();
  *applied = settled->applied;
  log_round(round, settled->applied                          ? "applied by the group"
                   : settled->attempts < policy.max_attempts ? "dropped (no peer lost)"
                                                             : "dropped (no retry left)");
  return Status::ok();
}

// The engine's rounds: retried only over a ring that lost a member, at most max_attempts times
// (once for the delayed methods, whose next round already started, and for LossPolicy::kDrop);
// a round that fails for good is dropped after the ring is re-formed; a local failure is never
// fatal (the round is dropped and training goes on).
peer::SettlePolicy SyncEngine::round_policy() const {
  peer::SettlePolicy policy;
  const bool retries = !delayed() && options_.on_loss != LossPolicy::kDrop;
  policy.max_attempts = retries ? options_.max_attempts : 1;
  policy.node_point = static_cast<uint32_t>(NodePoint::kRound);
  policy.fatal = [](const Status&) { return false; };
  policy.retry_only_after_loss = true;
  policy.reform_after_last = true;
  return policy;
}

// Attempt n of a round: the first was launched at its launch step; a retry forms the fragment's
// pseudo-gradient again and launches it on the re-formed ring. This peer's outcome.
Status SyncEngine::attempt(Round& round, uint32_t n) {
  if (n > 1) {
    log_round(round, "retried");
    {
      MutexLock lock(stats_mu_);
      ++stats_.retries;
    }
    LH_RETURN_IF_ERROR(form_delta(round.fragment, contributes(round.fragment)));
    round.late = false;
    round.launch_failure = start_ops(round);
  }
  const Status local = wait_for(round);
  if (!local.is_ok())
    log::debug("sync", "round {} of fragment {} failed here: {}", round.number, round.fragment,
               local.to_string());
  return local;
}

// Debug logs of how a round settles, with the epoch and ring it settles in (taken only when
// debug logging is on: once per round and step).
void SyncEngine::log_round(const Round& round, std::string_view what) {
  if (log::level() > log::Level::kDebug) return;
  const auto view = group_.view();
  log::debug("sync", "round {} of fragment {} (step {}, attempt {}): {} in epoch {} over [{}]",
             round.number, round.fragment, state_.step(), round.attempts, what, view.epoch,
             fmt::join(view.ring, " "));
}

Status SyncEngine::settle_ahead(Round& round) {
  if (round.settled) return Status::ok();
  LH_RETURN_IF_ERROR(settle(round, &round.decided_apply));
  round.settled = true;
  // The sparse sum lands in the staging buffer here, so a checkpoint written now holds it.
  LH_RETURN_IF_ERROR(settle_sparse(round));
  return Status::ok();
}

Status SyncEngine::finish_round(bool restart) {
  Round& round = *in_flight_;
  LH_RETURN_IF_ERROR(settle_ahead(round));
  bool applied = round.decided_apply;
  RoundReport report;
  report.fragment = round.fragment;
  report.round = round.number;
  report.late = round.late;
  // The deadline wait_for used: only an applied round's reports move it (take_reports, below), and
  // no other round settles while this one is in flight.
  report.deadline = round_deadline();
  report.attempts = round.attempts;
  report.launched_at = round.launched_at;
  report.ready_at = round.ready_at;
  const peer::TrafficTotals now = collectives_.traffic();
  if (round.launched_at != Clock::time_point{})  // not a round read from a checkpoint
    report.event_bytes = (now.data_sent - round.traffic_at_launch.data_sent) +
                         (now.data_received - round.traffic_at_launch.data_received);
  if (round.gather)
    report.payload_sent = round.gather->info().bytes_sent;
  else if (round.delta_op)
    report.payload_sent = round.delta_op->info().bytes_sent;
  report.encoded_bytes = round.encoded_bytes;
  const auto contribution =
      std::span(round.masks).first(std::min(round.masks.size(), 2 * round.members));
  const Tally t = applied ? tally(contribution, round_identity(round)) : Tally{};
  // A member that was in another round: every member enters an epoch from the same round
  // (docs/protocol.md, "Batch decisions"), so members a round apart are a bug, and they would drop
  // every round from here on. Every member sees the same masks: they all stop here, loudly.
  if (applied && t.misaligned)
    return internal_error(fmt::format(
        "round {} of fragment {}: the members of the ring [{}] sent rounds [{}] (identities mod "
        "2^24); members in different rounds can never apply one",
        round.number, round.fragment, fmt::join(round.ring, " "),
        fmt::join(contribution.subspan(contribution.size() / 2), " ")));
  report.applied = applied;
  if (applied && t.change_pending) admission_due_ = true;
  if (applied) {
    take_reports(round);
    measure(round);
    report.participants = t.counted;
    for (size_t r : t.non_finite) report.non_finite_peers.push_back(round.ring[r]);
    for (size_t r : t.malformed) report.malformed_peers.push_back(round.ring[r]);
    average(round.delta, t.counted, workers_);
    if (delayed())
      LH_RETURN_IF_ERROR(
          apply_delayed(round.fragment, t.counted > 0 ? round.delta : std::span<float>{}, restart));
    else if (t.counted > 0)
      LH_RETURN_IF_ERROR(apply_diloco(round.fragment, round.delta));
  } else if (delayed()) {
    LH_RETURN_IF_ERROR(apply_delayed(round.fragment, {}, restart));
  }
  in_flight_.reset();
  record(report);
  return Status::ok();
}

Status SyncEngine::apply_diloco(uint32_t f, std::span<const float> average) {
  const bool first = state_.rounds(f) == 0;
  auto theta = state_.theta_g(f);
  auto buffer = state_.momentum(f);
  workers_.parallel_for((theta.size() + kChunk - 1) / kChunk, [&](size_t c) {
    const size_t begin = c * kChunk, n = std::min(kChunk, theta.size() - begin);
    nesterov_step(theta.subspan(begin, n), buffer.subspan(begin, n), average.subspan(begin, n),
                  options_.nesterov, first);
  });
  ++state_.rounds(f);
  LH_RETURN_IF_ERROR(layout_.merge(f, theta, options_.mix, workers_));
  last_reset_[f] = state_.step();
  return Status::ok();
}

// CO2 and eager at a launch step, in one pass over the fragment: take the delayed round's
// average into the shared state (when it was applied), form this round's pseudo-gradient into the
// staging buffer against where this peer's round started, and restart the local parameters (CO2:
// from θ_g; eager: from its tentative step with this peer's fresh pseudo-gradient, kept as the
// deviation e = r − θ_g so that the next round's start is θ_g + e). `restart` false (close): only
// the shared update and θ_local ← θ_g.
Status SyncEngine::apply_delayed(uint32_t f, std::span<const float> average, bool restart) {
  const bool update = !average.empty();
  const bool first = state_.rounds(f) == 0;
  const bool full = contributes(f);
  const auto theta = state_.theta_g(f);
  const auto momentum = state_.momentum(f);
  const bool eager = options_.method == Method::kEager;
  const std::span<float> deviation(eager_deviation_);
  std::atomic<bool> finite{true};
  LH_RETURN_IF_ERROR(layout_.update(
      f,
      [&](size_t position, std::span<float> local) {
        bool ok = true;
        for (size_t j = 0; j < local.size(); ++j) {
          const size_t i = position + j;
          const float g = update ? average[i] : 0.0f;  // read before staging_[i] is overwritten
          // The peer's outer gradient against where its round started.
          float fresh = (eager ? theta[i] + deviation[i] : theta[i]) - local[j];
          if (!std::isfinite(fresh)) {
            ok = false;
            fresh = 0.0f;
          }
          if (update && options_.method == Method::kCo2)
            co2_element(theta[i], momentum[i], g, options_.co2);
          else if (update)
            nesterov_element(theta[i], momentum[i], g, options_.nesterov, first);
          local[j] = theta[i];
          if (!restart) continue;
          if (eager) {
            const float start = eager_restart_element(theta[i], momentum[i], fresh,
                                                      options_.nesterov, first && !update);
            deviation[i] = start - theta[i];
            local[j] = theta[i] + deviation[i];
          }
          staging_[i] = fresh;
        }
        if (!ok) finite.store(false, std::memory_order_relaxed);
      },
      workers_));
  if (update) ++state_.rounds(f);
  last_reset_[f] = state_.step();
  if (!restart) return Status::ok();
  staged_code_ = !full            ? Contribution::kNone
                 : !finite.load() ? Contribution::kNonFinite
                                  : Contribution::kCounted;
  if (staged_code_ != Contribution::kCounted)
    std::fill(staging_.begin(), staging_.begin() + static_cast<std::ptrdiff_t>(theta.size()), 0.0f);
  return Status::ok();
}

}  // namespace longhaul::sync
