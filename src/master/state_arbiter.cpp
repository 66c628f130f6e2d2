#include "master/state_arbiter.hpp"

#include <fmt/format.h>

#include "common/log.hpp"

namespace longhaul::master {

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
  if (round.reports.empty()) round.epoch = report.epoch;
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
  round.planned = true;
  round.phase_seen.reset();  // the fetch phase's deadline counts from now
  round.next_revision = e.revision + 1;
  size_t fetchers = 0, refused = 0, blocks = 0;
  for (auto& [id, plan] : e.plans) {
    if (plan.code == LH_OK) {
      round.fetching.insert(id);
      round.releasing.insert(id);
      if (!plan.fetches.empty()) ++fetchers;
      for (const auto& src : plan.sources) round.sources[id].insert(src.peer_id);
      for (const auto& f : plan.fetches) blocks += f.blocks.size();
    } else {
      misses_.erase(id);  // its part of the sync ends here, in time
      ++refused;
      log::warn("master", "group {} state sync: peer {} refused: {}", group, id, plan.reason);
    }
    out_.send(id, plan);
  }
  round.planned_bytes = blocks * uint64_t{round.reports.begin()->second.report.block_bytes};
  log::info("master",
            "group {} state sync at revision {}: {} peers, {} fetching {} blocks, {} refused",
            group, e.revision, e.plans.size(), fetchers, blocks, refused);
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
  misses_.erase(id);
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
  misses_.erase(id);
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
  std::vector<uint32_t> late;
  for (auto& [group, round] : rounds_) {
    if (!round.phase_seen) {
      round.phase_seen = now;
      continue;
    }
    auto limit = timeout;
    if (round.planned)
      limit += std::chrono::milliseconds(round.planned_bytes * 1000 / kMinFetchBytesPerSecond);
    if (now - *round.phase_seen >= limit) late.push_back(group);
  }
  for (uint32_t group : late) {
    Round& round = rounds_.at(group);
    if (round.planned)
      leave_out_fetchers(group, round);
    else
      leave_out_reporters(group, round);
  }
  return std::exchange(to_evict_, {});
}

void StateArbiter::leave_out_reporters(uint32_t group, Round& round) {
  for (const auto& [id, m] : membership_.members()) {
    if (m.group != group || m.state != Membership::State::kActive) continue;
    if (round.reports.contains(id) || !round.excused.insert(id).second) continue;
    log::warn("master",
              "group {} state sync: peer {} missed the report deadline; planning "
              "without it",
              group, id);
    count_miss(id, "report");
  }
  maybe_plan(group);
}

void StateArbiter::leave_out_fetchers(uint32_t group, Round& round) {
  for (PeerId id : round.fetching) {
    log::warn("master",
              "group {} state sync: peer {} did not finish fetching in time; releasing "
              "the others",
              group, id);
    round.releasing.erase(id);
    late_done_[id] = round.epoch;
    count_miss(id, "fetch");
  }
  round.fetching.clear();
  maybe_complete(group);
}

void StateArbiter::count_miss(PeerId id, const char* what) {
  if (++misses_[id] < kMissesToEvict) return;
  to_evict_.emplace_back(id, timeout_error(fmt::format(
                                 "missed the {} deadline of {} state syncs in a row (the others' "
                                 "syncs went on without it)",
                                 what, misses_[id])));
}

}  // namespace longhaul::master
