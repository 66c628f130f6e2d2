// The master's side of shared-state syncs: collects the reports of a peer group, elects the
// popular content (state/election.hpp), sends every peer its plan, and releases the group once
// every fetcher is done. Holds hashes only, never tensor data.
//
// A sync round per group: it collects a STATE_REPORT from every active member of the group (a
// member lost meanwhile is simply no longer waited for), then answers each with STATE_PLAN. Peers
// whose plan is OK fetch what it names and answer STATE_DONE; once every one of them has (or was
// lost), each gets STATE_COMPLETE and may stop serving blocks. Refused peers take no further part.
// A peer lost while fetchers still use it as a source is named to each of them (STATE_SOURCE_LOST):
// a frozen process keeps its sockets open, so without the master's word a fetcher would notice only
// after its stall timeout.
// The revision of the group's last completed sync is remembered for the next election, and so is
// its content (tensor digests): a tie goes to the member still holding it (state_ties.hpp).
//
// Every sync has deadlines (expire(), which the caller runs a few times a second) that follow the
// group's recent syncs (sync_pace.hpp), within `timeout`: a sync still collecting reports waits
// the group's report deadline for the missing members, then plans without them; a planned sync
// waits the group's fetch deadline plus its planned bytes at kMinFetchBytesPerSecond for the
// fetchers' STATE_DONE, then releases the others without them. A member left out answers late:
// its report is refused (LH_ERR_TIMEOUT), its STATE_DONE answered with STATE_COMPLETE (its own
// sync fails). A member left out, or whose report the election refused, is the sync's outlier;
// one that was the outlier of PaceRule::outliers_to_evict of its last PaceRule::window syncs is
// returned by expire() to be evicted. Members left out of a sync whose every reporter was an
// outlier of the group's sync before are not outliers: that sync is the late ones' retry of one
// the others already did.
//
// Like Membership it is pure logic on the master's strand: events are calls, effects go out
// through the Outbox.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "master/membership.hpp"
#include "master/state_sources.hpp"
#include "master/state_ties.hpp"
#include "master/sync_pace.hpp"
#include "state/election.hpp"

namespace longhaul::master {

class StateArbiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint64_t kMinFetchBytesPerSecond = 1u << 20;

  StateArbiter(Outbox& outbox, const Membership& membership, uint32_t max_tensors,
               PaceRule pace = {})
      : out_(outbox), membership_(membership), max_tensors_(max_tensors), pace_(pace) {}

  // A non-OK result is a protocol violation by `id` (the caller drops it).
  Status on_report(PeerId id, wire::StateReportMsg report);
  Status on_done(PeerId id, const wire::StateDoneMsg& done);
  // The peer left or was lost (Membership has forgotten it already).
  void on_peer_gone(PeerId id);
  // A member of the group waits in update_topology (Membership aborted the group): it will not
  // report in this epoch, so a sync still collecting reports is refused to those that reported
  // (LH_ERR_ABORTED: they retry after update_topology).
  void on_group_reconfiguring(uint32_t group);

  // Ends the phases past their deadline (each counted from the first call that saw it begin, so
  // call it at least a few times a second); `timeout` is the longest a deadline may be. Returns
  // the members to evict, with the reason.
  std::vector<std::pair<PeerId, Status>> expire(Clock::time_point now,
                                                std::chrono::milliseconds timeout);

  std::optional<uint64_t> group_revision(uint32_t group) const;

 private:
  struct Round {
    uint64_t epoch = 0;
    std::map<PeerId, state::Participant> reports;
    bool planned = false;
    uint64_t next_revision = 0;
    std::set<PeerId> fetching;                   // OK plans that have not answered STATE_DONE
    std::map<PeerId, std::set<PeerId>> sources;  // per fetcher, the sources its plan names
    std::set<PeerId> releasing;                  // OK plans: they get STATE_COMPLETE
    size_t failed = 0;
    std::set<PeerId> excused;                           // left out at the report deadline
    uint64_t planned_bytes = 0;                         // what the plans fetch, all fetchers
    std::optional<Clock::time_point> phase_seen;        // collecting or fetching, since
    StateTies::Digests elected;                         // what the OK plans hold once done
    Clock::time_point started, planned_at;              // the first report; the plan
    std::vector<SyncPace::Lag> report_lags, done_lags;  // of the answers in time
    std::map<PeerId, std::string> outliers;             // and why each was one
  };
  // The deadline of the round's phase passed: the members it still waits for are left out.
  void leave_out_reporters(uint32_t group, Round& round, SyncPace::Lag deadline);
  void leave_out_fetchers(uint32_t group, Round& round, SyncPace::Lag deadline);
  // The round ends: one more sync for each of its members, and the outliers that reached the
  // eviction count go to to_evict_.
  void count_outliers(uint32_t group, const Round& round);
  void maybe_plan(uint32_t group);
  bool reconfiguring(uint32_t group) const;
  static wire::StatePlanMsg aborted_plan(uint64_t epoch, uint32_t group);
  static wire::StatePlanMsg late_plan(uint64_t epoch, uint32_t group);
  void maybe_complete(uint32_t group);

  Outbox& out_;
  const Membership& membership_;
  const uint32_t max_tensors_;
  std::map<uint32_t, Round> rounds_;
  std::map<uint32_t, uint64_t> revisions_;
  StateSources node_sources_;                           // one source node per fetching node
  StateTies ties_;                                      // ties go to what the group last agreed on
  SyncPace pace_;                                       // the deadlines and each member's outliers
  std::map<uint32_t, std::set<PeerId>> last_outliers_;  // of each group's last sync
  std::map<PeerId, uint64_t> late_done_;                // fetchers left out, by the sync's epoch
  std::vector<std::pair<PeerId, Status>> to_evict_;
};

}  // namespace longhaul::master
