// The master's side of lh_allreduce_batch: the commit point of every batch attempt. After an
// attempt each member reports whether all of its all-reduces succeeded (BATCH_REPORT); the master
// decides once per (group, epoch, attempt) and tells every member that reported or will report
// (BATCH_DECISION), so the members of a group never disagree on an attempt's outcome, however
// late an abort reached each of them. A FAILED attempt of the committed epoch ends the epoch
// (Membership::on_batch_failed): every member re-forms before its next collective, so they all
// enter the next epoch from this attempt.
//
// The decision is OK once every active member of the group has reported OK, and FAILED as soon
// as one reports a failure or the group's epoch fails (Outbox::group_epoch_failed: a member lost
// or left, a link broke, a member waits in update_topology). A decision is final. Reports for an
// epoch the group has moved past get the recorded decision, or FAILED if none was recorded (an
// honest member cannot report for an old epoch: it joined the newer one after its report).
//
// An attempt that waits for reports past its deadline (expire(), which the caller runs a few
// times a second) fails, and the members that did not report are returned to be evicted: a
// member reports the moment its all-reduces end, at about the same time as the others, so
// one that has not within the deadline misbehaves (a frozen one is caught by its heartbeats
// first).
//
// Members the group waits for (docs/protocol.md, "Members the group waits for"): an engine round
// that ran past a member's own deadline is reported `late`, and such a report decides its attempt
// FAILED. The others' attempts then fail within moments (the aborted operation cancels its
// transfers at both ends), so a member whose report comes more than kWaitedForGrace after that
// decision, and not late itself, had not even started the round: the group waited for it. A
// member the group waited for in `evict_after_missed` attempts in a row is evicted with that
// reason (it may register again after its back-off, as a joiner); any other report of it starts
// the count again.
//
// Like Membership it is pure logic on the master's strand: events are calls (with the time passed
// in), effects go out through the Outbox.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "master/membership.hpp"

namespace longhaul::master {

class BatchArbiter {
 public:
  using Clock = std::chrono::steady_clock;
  // How long after an attempt failed at a member's deadline the others' reports may still come
  // without counting as waited for: their failure travels as a cancel over one data link (a round
  // trip at most) and their report over the control link, well under a second on any path the
  // deadlines are meant for, while the member waited for reports only when it reaches the round.
  static constexpr std::chrono::milliseconds kWaitedForGrace{1000};

  // `evict_after_missed`: the attempts in a row the group may wait for one member before it is
  // evicted; 0: never.
  BatchArbiter(Outbox& outbox, Membership& membership, uint32_t evict_after_missed = 0)
      : out_(outbox), membership_(membership), evict_after_missed_(evict_after_missed) {}

  // A non-OK result is a protocol violation by `id` (the caller drops it). May evict `id` (see
  // above).
  Status on_report(PeerId id, const wire::BatchReportMsg& report,
                   Clock::time_point now = Clock::now());
  // Not every member of `group` completes the committed epoch's operations: its undecided
  // attempts in that epoch, and any later one in it, fail. Called from inside Membership (an
  // Outbox effect), so it does not call back into it.
  void on_group_epoch_failed(uint32_t group);

  // Fails the undecided attempts of the committed epoch that have waited `timeout` (counted from
  // the first call that saw them) and returns their members that did not report, with the reason.
  std::vector<std::pair<PeerId, Status>> expire(Clock::time_point now,
                                                std::chrono::milliseconds timeout);

  // Recovery after a master restart (membership.hpp): a rejoining member knew this decision of
  // the previous master; members still waiting for it get the same one.
  void record_decision(uint32_t group, uint64_t epoch, uint64_t attempt, bool ok);
  // Membership finished its recovery: the reports held back meanwhile are decided now (with every
  // decision the rejoined members knew already recorded), and a group with a member waiting in
  // update_topology fails its undecided attempts, as its epoch cannot complete.
  void finish_recovery();

 private:
  using Key = std::tuple<uint32_t, uint64_t, uint64_t>;  // group, epoch, attempt
  struct Attempt {
    std::set<PeerId> reported;
    std::optional<bool> decision;
    std::optional<Clock::time_point> seen;  // undecided since
    // Decided FAILED by a report that said its member's deadline passed, at this time.
    std::optional<Clock::time_point> failed_at_deadline;
  };
  void decide(const Key& key, Attempt& attempt, bool ok);
  // Counts whether the group waited for `id` in `attempt`; evicts it at evict_after_missed_.
  void count_waits(PeerId id, const wire::BatchReportMsg& report, const Attempt& attempt,
                   Clock::time_point now);
  bool everyone_reported(uint32_t group, const Attempt& attempt) const;
  void forget_old_epochs();

  Outbox& out_;
  Membership& membership_;
  std::map<Key, Attempt> attempts_;
  std::map<uint32_t, uint64_t> failed_epoch_;  // group -> the epoch its operations failed in
  const uint32_t evict_after_missed_;
  std::map<PeerId, uint32_t> waited_for_;  // attempts in a row the group waited for the member
  // While Membership recovers, reports wait here: a decision the previous master made may still
  // arrive with a rejoining member.
  std::vector<std::pair<PeerId, wire::BatchReportMsg>> held_;
};

}  // namespace longhaul::master
