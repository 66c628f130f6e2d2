// How long a group's shared-state syncs wait for a member, learned from the group's recent syncs,
// and which members keep falling outside it (issue 50, item 4).
//
// A constant deadline lets a member that answers just inside it set the pace of every sync (28 s
// of 30 each time) without ever missing it. So each phase of a sync (the reports, the fetchers'
// STATE_DONE) waits as long as the group usually takes, plus a spread:
//
//   samples   the lags of every answer in time in the group's last `window` syncs: from the
//             phase's start (the first report; the plan) to the member's answer (the first
//             report's lag is 0)
//   deadline  clamp(M + max(4 x MAD, M / 2), floor, ceiling), M the lower median of the samples
//             and MAD the lower median of their distances to M; the ceiling (the master's
//             round timeout) alone until the group has ended a phase
//
// The lower median belongs to the faster half of the answers, so one slow member in a group of
// two or three cannot raise it; the spread leaves room for the group's own scatter. A member is
// the outlier of a sync when it answered after the deadline or its report was refused; one that
// was the outlier of `outliers_to_evict` of its last `window` syncs is to be evicted.
//
// Pure logic with no clock of its own: the arbiter passes the lags it measured.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "master/ring_order.hpp"  // PeerId

namespace longhaul::master {

struct PaceRule {
  // Never wait less than this for a member (the cost of the rule to an honest member that is
  // slower than the rest of its group: see docs/security.md).
  std::chrono::milliseconds floor{2000};
  // n: the syncs remembered per group (for the deadline) and per member (for its outliers).
  uint32_t window = 8;
  // k: outliers among a member's last `window` syncs that evict it.
  uint32_t outliers_to_evict = 3;
};

class SyncPace {
 public:
  using Lag = std::chrono::milliseconds;
  enum class Phase { kReport, kFetch };
  static constexpr int64_t kSpreadMads = 4;

  explicit SyncPace(PaceRule rule) : rule_(rule) {}

  // A phase of one of `group`'s syncs ended: the lags of the members that answered in time.
  void record(uint32_t group, Phase phase, const std::vector<Lag>& lags);
  // The phase's deadline for `group`, from its start.
  Lag deadline(uint32_t group, Phase phase, Lag ceiling) const;

  // One more sync of `id`'s, `why` saying how it was the outlier (empty: it was not). Returns how
  // many of its last `window` syncs it was the outlier of.
  uint32_t count(PeerId id, std::string why);
  // The reasons of the member's outlier syncs still remembered, oldest first.
  std::vector<std::string> reasons(PeerId id) const;
  void forget(PeerId id) { members_.erase(id); }

  const PaceRule& rule() const { return rule_; }

 private:
  const PaceRule rule_;
  std::map<std::pair<uint32_t, Phase>, std::deque<std::vector<Lag>>> groups_;
  std::map<PeerId, std::deque<std::string>> members_;  // per sync, why it was the outlier or ""
};

}  // namespace longhaul::master
