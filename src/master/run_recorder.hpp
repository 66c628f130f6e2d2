// The master's record of what happened in the run, for its status page and metrics: joins,
// leaves, losses, evictions, aborts and epoch changes with their reasons, each member's last
// PEER_STATS, and a throughput history. build() combines it with the membership into a RunStatus.
//
// Pure logic like Membership: it runs on the master's strand, takes no lock, reads no clock (the
// caller passes the time, unix seconds) and is bounded: at most kMaxEvents events and
// kMaxThroughputSamples samples are kept, and one PEER_STATS (itself bounded by the decoder) per
// member.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "master/membership.hpp"
#include "master/run_status.hpp"

namespace longhaul::master {

class RunRecorder {
 public:
  static constexpr size_t kMaxEvents = 200;
  static constexpr size_t kMaxThroughputSamples = 600;

  explicit RunRecorder(double started_at) : started_at_(started_at) {}

  void joined(PeerId id, uint32_t group, double now);
  // The peer is no longer a member; `reason` as Membership logs it ("evicted: ...", "dropped: ...",
  // "connection lost ...", "left gracefully ...").
  void left(PeerId id, uint32_t group, const std::string& reason, bool graceful, double now);
  // One ABORT to the group (the copies to its other members are the same event).
  void aborted(uint32_t group, uint64_t epoch, const std::string& reason, double now);
  void stats(PeerId id, wire::PeerStatsMsg stats, double now);

  // The run now: `membership` for who is in, `revision_of` for each group's state revision.
  // Records an epoch event when the committed epoch changed since the last build, and one
  // throughput sample.
  template <class RevisionOf>
  RunStatus build(const Membership& membership, RevisionOf revision_of, size_t connections,
                  double now) {
    RunStatus s = build_common(membership, connections, now);
    for (auto& [group, g] : s.groups) g.revision = revision_of(group);
    return s;
  }

 private:
  struct Report {
    wire::PeerStatsMsg last;
    std::optional<wire::PeerStatsMsg> previous;
    double at = 0, previous_at = 0;
  };
  RunStatus build_common(const Membership& membership, size_t connections, double now);
  void add_event(RunEvent event);
  void fill_peer(const Membership::Member& m, std::string node, double now, RunStatus* s) const;
  static void mark_mismatches(RunStatus* s);

  const double started_at_;
  std::deque<RunEvent> events_;
  std::map<std::string, uint64_t> totals_;
  std::map<PeerId, double> joined_at_;
  std::map<PeerId, Report> reports_;
  std::deque<ThroughputSample> throughput_;
  // Cumulative bytes of peers that have left, so the run's totals never go down.
  uint64_t departed_data_ = 0, departed_control_ = 0, departed_state_ = 0;
  uint64_t last_epoch_ = 0;
  std::optional<std::tuple<uint32_t, uint64_t, std::string>> last_abort_;
};

}  // namespace longhaul::master
