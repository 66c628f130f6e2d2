#include "master/state_arbiter.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/log.hpp"

namespace longhaul::master {
namespace {

SyncPace::Lag since(StateArbiter::Clock::time_point t) {
  return std::chrono::duration_cast<SyncPace::Lag>(StateArbiter::Clock::now() - t);
}

}  // namespace

std::optional<uint64_t> StateArbiter::group_revision(uint32_t group) const {
  auto it = revisions_.find(group);
  if (it == revisions_.end()) return std::nullopt;
  return it->second;
}

Status StateArbiter::on_report(PeerId id, wire::StateReportMsg report) {
  auto it = membership_.members().find(id);
  if (it == membership_.members().end() || it->second.state != Membership::State::kActive)
    return protocol_error("STATE_REPORT before being admitted");
  if (report.epoch != membership_.epoch())
    return protocol_error(fmt::format("STATE_REPORT for epoch {} but the epoch is {}", report.epoch,
                                      membership_.epoch()));
  if (report.tensors.size() > max_tensors_)
    return invalid_argument(fmt::format(
        "a state report of {} tensors exceeds this master's limit of {} (longhaul-master "
        "--max-state-tensors)",
        report.tensors.size(), max_tensors_));
  LH_RETURN_IF_ERROR(state::validate_report(report));
  const uint32_t group = it->second.group;
  if (reconfiguring(group)) {
    log::info("master", "group {} state sync: peer {} aborted: a member waits in update_topology",
              group, id);
    out_.send(id, aborted_plan(report.epoch, group));
    return Status::ok();
  }
  Round& round = rounds_[group];
  if (round.planned && round.excused.contains(id)) {
    out_.send(id, late_plan(report.epoch, group));
    return Status::ok();
  }
  if (round.planned)
    return protocol_error("STATE_REPORT while the group's sync is still transferring");
  if (round.reports.contains(id)) return protocol_error("a second STATE_REPORT in one sync");
  if (round.reports.empty()) {
    round.epoch = report.epoch;
    round.started = Clock::now();
  }
  round.report_lags.push_back(since(round.started));
  state::Participant p;
  p.report = std::move(report);
  p.host = it->second.host;
  p.port = it->second.port;
  round.reports.emplace(id, std::move(p));
  log::debug("master", "group {} state sync: peer {} reported ({} so far)", group, id,
             round.reports.size());
  maybe_plan(group);
  return Status::ok();
}

void StateArbiter::maybe_plan(uint32_t group) {
  Round& round = rounds_.at(group);
  if (round.planned) return;
  // Reports come only from active members of the group (on_report) and leave with them
  // (on_peer_gone): counting them tells whether all are in, without a scan per report.
  if (round.reports.size() + round.excused.size() < membership_.group_active(group)) return;
  if (round.reports.empty()) {
    rounds_.erase(group);
    return;
  }
  auto it = revisions_.find(group);
  state::Election e =
      ties_.elect(group, round.reports,
                  it == revisions_.end() ? std::nullopt : std::optional(it->second), round.epoch);
  round.elected = StateTies::elected_content(round.reports, e);
  node_sources_.apply(group, membership_.nodes(), e);
  pace_.record(group, SyncPace::Phase::kReport, round.report_lags);
  round.planned = true;
  round.phase_seen.reset();  // the fetch phase's deadline counts from now
  round.planned_at = Clock::now();
  round.next_revision = e.revision + 1;
  size_t fetchers = 0, blocks = 0;
  std::vector<PeerId> refused;
  for (auto& [id, plan] : e.plans) {
    if (plan.code == LH_OK) {
      round.fetching.insert(id);
      round.releasing.insert(id);
      if (!plan.fetches.empty()) ++fetchers;
      for (const auto& src : plan.sources) round.sources[id].insert(src.peer_id);
      for (const auto& f : plan.fetches) blocks += f.blocks.size();
    } else {
      // A refused report holds the group as long as an honest one and moves nothing forward.
      round.outliers[id] = fmt::format("its report was refused ({})", plan.reason.substr(0, 160));
      refused.push_back(id);
      log::warn("master", "group {} state sync: peer {} refused: {}", group, id, plan.reason);
    }
    out_.send(id, plan);
  }
  // With every report refused nobody stands out (a group of receive-only members, say).
  if (round.releasing.empty())
    for (PeerId id : refused) round.outliers.erase(id);
  round.planned_bytes = blocks * uint64_t{round.reports.begin()->second.report.block_bytes};
  log::info("master",
            "group {} state sync at revision {}: {} peers, {} fetching {} blocks, {} refused",
            group, e.revision, e.plans.size(), fetchers, blocks, refused.size());
  maybe_complete(group);
}

Status StateArbiter::on_done(PeerId id, const wire::StateDoneMsg& done) {
  auto m = membership_.members().find(id);
  if (m == membership_.members().end()) return internal_error(fmt::format("unknown peer {}", id));
  const uint32_t group = m->second.group;
  auto it = rounds_.find(group);
  if (auto late = late_done_.find(id);
      late != late_done_.end() && (it == rounds_.end() || !it->second.fetching.contains(id))) {
    // Left out at the fetch deadline: its sync has failed; release it.
    out_.send(id, wire::StateCompleteMsg{late->second});
    late_done_.erase(late);
    return Status::ok();
  }
  if (it == rounds_.end() || !it->second.planned || !it->second.fetching.erase(id))
    return protocol_error("STATE_DONE without a state sync to finish");
  it->second.done_lags.push_back(since(it->second.planned_at));
  if (done.code != LH_OK) {
    ++it->second.failed;
    log::warn("master", "group {} state sync: peer {} failed: {}", group, id, done.reason);
  }
  maybe_complete(group);
  return Status::ok();
}

void StateArbiter::maybe_complete(uint32_t group) {
  Round& round = rounds_.at(group);
  if (!round.planned || !round.fetching.empty()) return;
  pace_.record(group, SyncPace::Phase::kFetch, round.done_lags);
  count_outliers(group, round);
  if (round.releasing.size() > round.failed) {
    revisions_[group] = round.next_revision;
    ties_.agreed(group, std::move(round.elected));
  }
  out_.send_all({round.releasing.begin(), round.releasing.end()},
                wire::StateCompleteMsg{round.epoch});
  rounds_.erase(group);
}

bool StateArbiter::reconfiguring(uint32_t group) const {
  return membership_.group_waiting(group) > 0;
}

wire::StatePlanMsg StateArbiter::late_plan(uint64_t epoch, uint32_t group) {
  wire::StatePlanMsg plan;
  plan.epoch = epoch;
  plan.code = LH_ERR_TIMEOUT;
  plan.reason = fmt::format(
      "this report missed the deadline of group {}'s state sync, which went on without it", group);
  return plan;
}

wire::StatePlanMsg StateArbiter::aborted_plan(uint64_t epoch, uint32_t group) {
  wire::StatePlanMsg plan;
  plan.epoch = epoch;
  plan.code = LH_ERR_ABORTED;
  plan.reason = fmt::format("group {} is reconfiguring: a member waits in update_topology", group);
  return plan;
}

void StateArbiter::on_group_reconfiguring(uint32_t group) {
  auto it = rounds_.find(group);
  if (it == rounds_.end() || it->second.planned) return;  // a planned sync completes on its own
  log::info("master",
            "group {} state sync aborted before its plan ({} peers had reported): a member waits "
            "in update_topology",
            group, it->second.reports.size());
  for (const auto& [id, p] : it->second.reports)
    out_.send(id, aborted_plan(it->second.epoch, group));
  rounds_.erase(it);
}

void StateArbiter::on_peer_gone(PeerId id) {
  pace_.forget(id);
  for (auto& [group, outliers] : last_outliers_) outliers.erase(id);
  late_done_.erase(id);
  // Every round may have been waiting for this peer, also one it never reported to (the others
  // reported first and wait for its report): re-check them all.
  std::vector<uint32_t> groups;
  for (auto& [group, round] : rounds_) {
    round.reports.erase(id);
    round.fetching.erase(id);
    round.releasing.erase(id);
    round.sources.erase(id);
    round.excused.erase(id);
    round.outliers.erase(id);
    // Fetchers still at work drop the lost source now rather than when its link breaks (never,
    // for a frozen process whose kernel keeps the sockets) or their stall timeout fires.
    for (PeerId fetcher : round.fetching) {
      auto s = round.sources.find(fetcher);
      if (s == round.sources.end() || !s->second.erase(id)) continue;
      log::info("master", "group {} state sync: telling peer {} that its source {} is lost", group,
                fetcher, id);
      out_.send(fetcher, wire::StateSourceLostMsg{round.epoch, id});
    }
    groups.push_back(group);
  }
  for (uint32_t group : groups) {
    if (rounds_.at(group).planned)
      maybe_complete(group);
    else
      maybe_plan(group);
  }
}

std::vector<std::pair<PeerId, Status>> StateArbiter::expire(Clock::time_point now,
                                                            std::chrono::milliseconds timeout) {
  std::vector<std::pair<uint32_t, SyncPace::Lag>> late;
  for (auto& [group, round] : rounds_) {
    if (!round.phase_seen) {
      round.phase_seen = now;
      continue;
    }
    const auto phase = round.planned ? SyncPace::Phase::kFetch : SyncPace::Phase::kReport;
    const SyncPace::Lag deadline = pace_.deadline(group, phase, timeout);
    auto limit = deadline;
    if (round.planned)
      limit += std::chrono::milliseconds(round.planned_bytes * 1000 / kMinFetchBytesPerSecond);
    if (now - *round.phase_seen >= limit) late.emplace_back(group, deadline);
  }
  for (const auto& [group, deadline] : late) {
    Round& round = rounds_.at(group);
    if (round.planned)
      leave_out_fetchers(group, round, deadline);
    else
      leave_out_reporters(group, round, deadline);
  }
  return std::exchange(to_evict_, {});
}

void StateArbiter::leave_out_reporters(uint32_t group, Round& round, SyncPace::Lag deadline) {
  // Members left out of the group's last sync that retry it alone: the others synced already and
  // come only to their next sync, so they are not late for this one.
  const auto& last = last_outliers_[group];
  const bool retry = std::all_of(round.reports.begin(), round.reports.end(),
                                 [&](const auto& r) { return last.contains(r.first); });
  for (const auto& [id, m] : membership_.members()) {
    if (m.group != group || m.state != Membership::State::kActive) continue;
    if (round.reports.contains(id) || !round.excused.insert(id).second) continue;
    log::warn("master", "group {} state sync: peer {} missed the report deadline ({} ms){}", group,
              id, deadline.count(),
              retry ? "; not counted: the reporters retry the sync it took part in" : "");
    if (!retry)
      round.outliers[id] =
          fmt::format("no report within the group's deadline of {} ms", deadline.count());
  }
  maybe_plan(group);
}

void StateArbiter::leave_out_fetchers(uint32_t group, Round& round, SyncPace::Lag deadline) {
  for (PeerId id : round.fetching) {
    log::warn("master",
              "group {} state sync: peer {} did not finish fetching in time; releasing "
              "the others",
              group, id);
    round.releasing.erase(id);
    late_done_[id] = round.epoch;
    round.outliers[id] =
        fmt::format("no STATE_DONE within the group's deadline of {} ms plus 1 s per MiB planned",
                    deadline.count());
  }
  round.fetching.clear();
  maybe_complete(group);
}

void StateArbiter::count_outliers(uint32_t group, const Round& round) {
  std::set<PeerId> members = round.excused;
  for (const auto& [id, p] : round.reports) members.insert(id);
  auto& last = last_outliers_[group];
  last.clear();
  for (const auto& [id, why] : round.outliers) last.insert(id);
  for (PeerId id : members) {
    auto why = round.outliers.find(id);
    const uint32_t outliers = pace_.count(id, why == round.outliers.end() ? "" : why->second);
    if (outliers < pace_.rule().outliers_to_evict) continue;
    std::string reasons;
    for (const auto& r : pace_.reasons(id)) reasons += (reasons.empty() ? "" : "; ") + r;
    to_evict_.emplace_back(
        id, timeout_error(
                fmt::format(
                    "was the outlier of {} of its last {} state syncs, which the others' went on "
                    "without (longhaul-master --state-outliers-to-evict): {}",
                    outliers, pace_.rule().window, reasons)
                    .substr(0, wire::kMaxReasonBytes)));
    pace_.forget(id);  // evicted once
  }
}

}  // namespace longhaul::master
