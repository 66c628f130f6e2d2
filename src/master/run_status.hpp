// What the master's status page, its JSON endpoint and its /metrics show (docs/operations.md): a
// plain copy of the run as the master sees it at one moment. The master builds one on its strand
// (RunRecorder::build) and publishes it (StatusBox); HTTP threads read only published copies, so a
// slow HTTP client never holds anything the master's event loop needs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.hpp"
#include "master/ring_order.hpp"
#include "master/send_counters.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::master {

// One data link as the peer at its near end measures it (PEER_STATS), with the send rate the
// master derives from two consecutive reports.
struct LinkStatus {
  PeerId from = 0, to = 0;
  wire::LinkStatsEntry stats;
  double send_rate = 0;  // bytes/s acknowledged by `to` between the last two reports
};

struct PeerStatus {
  PeerId id = 0;
  uint32_t group = 0;
  std::string host;  // the data address the peer advertised (or the master saw)
  uint16_t port = 0;
  // The failure unit the peer belongs to. Nodes (issue 21) are not in the protocol yet, so this is
  // the peer's host: the processes of one machine share it.
  std::string node;
  bool active = false;   // admitted into the committed epoch; false: waiting to join
  bool waiting = false;  // active and blocked in update_topology
  double joined_at = 0;  // unix seconds
  int ring_position = -1;
  bool has_stats = false;
  wire::PeerStatsMsg stats;  // the last PEER_STATS (links moved into `links` below)
  double stats_age_s = 0;
  double data_send_rate = 0, data_recv_rate = 0;  // bytes/s between the last two reports
  // has_stats && stats.has_state, and (revision, digest) differs from the most common pair among
  // the group's active members.
  bool state_mismatch = false;
};

struct RunEvent {
  double at = 0;     // unix seconds
  std::string kind;  // join, leave, lost, evicted, abort, epoch
  PeerId peer = 0;   // 0 for group-wide events
  uint32_t group = 0;
  uint64_t epoch = 0;
  std::string reason;
};

struct GroupStatus {
  uint32_t group = 0;
  std::vector<PeerId> ring;          // committed order
  std::optional<uint64_t> revision;  // of the group's last state sync the master released
  size_t members = 0, active = 0;
  size_t state_mismatches = 0;
};

struct ThroughputSample {
  double at = 0;           // unix seconds
  double bytes_per_s = 0;  // data bytes sent per second, summed over the peers reporting
};

struct RunStatus {
  double at = 0;  // unix seconds when built
  double uptime_s = 0;
  uint64_t epoch = 0;
  uint64_t op_sequence = 0;
  bool round_in_progress = false;
  bool peers_pending = false;
  size_t connections = 0;
  std::vector<PeerStatus> peers;  // ascending ids
  std::vector<LinkStatus> links;
  std::map<uint32_t, GroupStatus> groups;
  std::vector<RunEvent> events;                  // the most recent, oldest first
  std::map<std::string, uint64_t> event_totals;  // by kind, since the master started
  std::vector<ThroughputSample> throughput;      // the most recent, oldest first
  // Bytes moved by every peer that ever reported, departed ones included (data, control, state).
  uint64_t data_bytes_sent = 0, control_bytes_sent = 0, state_bytes_sent = 0;
  // Sync engines: the largest inner step, outer round and τ (round delay) any member reports.
  uint64_t engine_peers = 0, inner_steps = 0, outer_rounds = 0, delay = 0;
  // What the master itself wrote to its control links since it started, by message name.
  std::map<std::string, SentTotals> master_sent;
};

// The latest published RunStatus. Thread-safe; readers get a shared immutable copy.
class StatusBox {
 public:
  void publish(std::shared_ptr<const RunStatus> status) {
    MutexLock lock(mu_);
    latest_ = std::move(status);
  }
  std::shared_ptr<const RunStatus> latest() const {
    MutexLock lock(mu_);
    return latest_ ? latest_ : std::make_shared<const RunStatus>();
  }

 private:
  mutable Mutex mu_;
  std::shared_ptr<const RunStatus> latest_ GUARDED_BY(mu_);
};

}  // namespace longhaul::master
