#include "master/batch_arbiter.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/log.hpp"

namespace longhaul::master {

Status BatchArbiter::on_report(PeerId id, const wire::BatchReportMsg& report,
                               Clock::time_point now) {
  auto it = membership_.members().find(id);
  if (it == membership_.members().end()) return internal_error(fmt::format("unknown peer {}", id));
  if (it->second.state != Membership::State::kActive)
    return protocol_error("BATCH_REPORT before being admitted");
  if (membership_.recovering()) {
    if (report.epoch != it->second.epoch)
      return protocol_error(fmt::format("BATCH_REPORT for epoch {} but the peer is in epoch {}",
                                        report.epoch, it->second.epoch));
    held_.emplace_back(id, report);
    return Status::ok();
  }
  const uint64_t epoch = membership_.epoch();
  if (report.epoch > epoch)
    return protocol_error(
        fmt::format("BATCH_REPORT for epoch {} but the epoch is {}", report.epoch, epoch));
  forget_old_epochs();
  const uint32_t group = it->second.group;
  const Key key{group, report.epoch, report.attempt};
  Attempt& attempt = attempts_[key];
  if (!attempt.reported.insert(id).second)
    return protocol_error(fmt::format("second BATCH_REPORT for attempt {} of epoch {}",
                                      report.attempt, report.epoch));
  if (attempt.decision) {
    out_.send(id, wire::BatchDecisionMsg{report.epoch, report.attempt, *attempt.decision});
    count_waits(id, report, attempt, now);
    return Status::ok();
  }
  count_waits(id, report, attempt, now);
  const auto failed = failed_epoch_.find(group);
  if (!report.ok || report.epoch < epoch ||
      (failed != failed_epoch_.end() && failed->second == report.epoch)) {
    if (!report.ok && report.late) attempt.failed_at_deadline = now;
    decide(key, attempt, false);
    if (report.epoch == epoch) membership_.on_batch_failed();
  } else if (everyone_reported(group, attempt)) {
    decide(key, attempt, true);
  }
  // A retry that held joiners back has been decided: they may be admitted now. (Not from
  // on_group_epoch_failed, which runs inside Membership; a reconfiguration follows that anyway.)
  if (attempt.decision && report.epoch == epoch) membership_.release_held_joiners();
  return Status::ok();
}

void BatchArbiter::count_waits(PeerId id, const wire::BatchReportMsg& report,
                               const Attempt& attempt, Clock::time_point now) {
  const bool waited_for = attempt.failed_at_deadline && !report.late &&
                          now - *attempt.failed_at_deadline > kWaitedForGrace;
  if (!waited_for) {
    waited_for_.erase(id);
    return;
  }
  const uint32_t times = ++waited_for_[id];
  const auto after =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - *attempt.failed_at_deadline);
  log::info("master",
            "epoch {}: the group waited for peer {} in attempt {} ({} in a row): it "
            "reported {} ms after the others' deadline passed",
            report.epoch, id, report.attempt, times, after.count());
  if (evict_after_missed_ == 0 || times < evict_after_missed_) return;
  waited_for_.erase(id);
  membership_.expel(
      id, timeout_error(fmt::format(
              "the group waited for it in {} rounds in a row: each ran past the others' deadline "
              "before it started its part (the last by {} ms; the master's evict_after_missed is "
              "{})",
              times, after.count(), evict_after_missed_)));
}

void BatchArbiter::on_group_epoch_failed(uint32_t group) {
  const uint64_t epoch = membership_.epoch();
  failed_epoch_[group] = epoch;
  for (auto& [key, attempt] : attempts_)
    if (std::get<0>(key) == group && std::get<1>(key) == epoch && !attempt.decision)
      decide(key, attempt, false);
}

void BatchArbiter::decide(const Key& key, Attempt& attempt, bool ok) {
  const auto [group, epoch, number] = key;
  attempt.decision = ok;
  log::debug("master", "epoch {}: batch attempt {} of group {} {}", epoch, number, group,
             ok ? "succeeded" : "failed");
  out_.send_all({attempt.reported.begin(), attempt.reported.end()},
                wire::BatchDecisionMsg{epoch, number, ok});
}

// Counting is enough: only active members of the group report for its current epoch, and a member
// that goes (lost, left, waiting) fails the epoch's undecided attempts before it could be
// miscounted (on_group_epoch_failed). A scan of the members per report would cost N^2 per attempt.
bool BatchArbiter::everyone_reported(uint32_t group, const Attempt& attempt) const {
  return attempt.reported.size() >= membership_.group_active(group);
}

void BatchArbiter::forget_old_epochs() {
  // Every member of an older epoch has received its decisions and moved on (it reports in order
  // on one connection, and joined the newer epoch after its last report).
  const uint64_t epoch = membership_.epoch();
  std::erase_if(attempts_, [epoch](const auto& kv) { return std::get<1>(kv.first) < epoch; });
  std::erase_if(failed_epoch_, [epoch](const auto& kv) { return kv.second < epoch; });
  std::erase_if(waited_for_,
                [this](const auto& kv) { return !membership_.members().contains(kv.first); });
}

std::vector<std::pair<PeerId, Status>> BatchArbiter::expire(Clock::time_point now,
                                                            std::chrono::milliseconds timeout) {
  std::vector<std::pair<PeerId, Status>> silent;
  const uint64_t epoch = membership_.epoch();
  for (auto& [key, attempt] : attempts_) {
    const auto [group, attempt_epoch, number] = key;
    if (attempt.decision || attempt_epoch != epoch || membership_.recovering()) continue;
    if (!attempt.seen) attempt.seen = now;
    if (now - *attempt.seen < timeout) continue;
    for (const auto& [id, m] : membership_.members()) {
      if (m.group != group || m.state != Membership::State::kActive) continue;
      if (attempt.reported.contains(id)) continue;
      silent.emplace_back(id, timeout_error(fmt::format(
                                  "no BATCH_REPORT for attempt {} of epoch {} within {} ms of the "
                                  "others' (the attempt failed for everyone)",
                                  number, epoch, timeout.count())));
    }
    log::warn("master",
              "epoch {}: batch attempt {} of group {} waited {} ms for reports; failing it", epoch,
              number, group, timeout.count());
    decide(key, attempt, false);
    membership_.on_batch_failed();
  }
  return silent;
}

void BatchArbiter::record_decision(uint32_t group, uint64_t epoch, uint64_t attempt, bool ok) {
  Attempt& attempt_record = attempts_[Key{group, epoch, attempt}];
  if (attempt_record.decision && *attempt_record.decision != ok) {
    // Honest members cannot disagree: the previous master decided once. Keep the first.
    log::warn("master", "rejoining members disagree on batch attempt {} of epoch {} (group {})",
              attempt, epoch, group);
    return;
  }
  attempt_record.decision = ok;
}

void BatchArbiter::finish_recovery() {
  auto held = std::move(held_);
  held_.clear();
  for (const auto& [id, report] : held) {
    if (!membership_.members().contains(id)) continue;  // removed by the recovery
    if (Status s = on_report(id, report); !s)
      log::warn("master", "peer {}'s held batch report: {}", id, s.to_string());
  }
  std::set<uint32_t> reconfiguring;
  for (const auto& [id, m] : membership_.members())
    if (m.state == Membership::State::kActive && m.waiting) reconfiguring.insert(m.group);
  for (uint32_t group : reconfiguring) on_group_epoch_failed(group);
}

}  // namespace longhaul::master
