// What a peer tells the master about itself (PEER_STATS, docs/protocol.md): its traffic, its data
// links as the kernel measures them (net/tcp_stats.hpp), and the progress of the layers above the
// session (the last state sync, the sync engine), which they post on a StatsBoard.
//
// The session sends one PEER_STATS with every heartbeat once admitted; the master shows them on
// its status page and in its metrics (docs/operations.md). Nothing here blocks or waits on the
// network: building the message costs one getsockopt per data connection.
#pragma once

#include <cstdint>
#include <memory>

#include "common/mutex.hpp"
#include "net/traffic.hpp"
#include "peer/topology.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::peer {

// The sync engine's figures, as PEER_STATS carries them.
struct EngineFigures {
  uint64_t inner_steps = 0;
  uint64_t outer_rounds = 0;  // rounds applied
  uint64_t rounds_dropped = 0;
  uint64_t last_round_participants = 0;
  uint64_t last_round_bytes = 0;
  uint64_t blocked_ns = 0;
  // The overlap (docs/overlap.md, "What it reports"): τ now, the steps the last cycle needed,
  // τ's changes, and this peer's last sync time and step time.
  uint32_t delay = 0;
  uint32_t delay_needed = 0;
  uint64_t delay_changes = 0;
  uint64_t sync_time_ns = 0;
  uint64_t step_time_ns = 0;
};

// Progress posted by the layers above the session. Thread-safe.
class StatsBoard {
 public:
  // A state sync succeeded: the registry is at `revision`, its content has `digest`.
  void set_state(uint64_t revision, uint64_t digest);
  void set_engine(const EngineFigures& figures);
  // Copies the figures posted so far into `out` (has_state / has_engine tell which).
  void fill(wire::PeerStatsMsg* out) const;

 private:
  mutable Mutex mu_;
  bool has_state_ GUARDED_BY(mu_) = false;
  uint64_t revision_ GUARDED_BY(mu_) = 0;
  uint64_t digest_ GUARDED_BY(mu_) = 0;
  bool has_engine_ GUARDED_BY(mu_) = false;
  EngineFigures engine_ GUARDED_BY(mu_);
};

// The counters a communicator keeps (communicator.hpp) and its board.
struct StatsSources {
  std::shared_ptr<net::TrafficCounter> data, control, state;
  std::shared_ptr<StatsBoard> board;
};

// One PEER_STATS: the counters, the board, and every data link of `links` (at most
// wire::kMaxStatsLinks, in ascending peer id order).
wire::PeerStatsMsg make_peer_stats(const StatsSources& sources, const RingLinks& links);

}  // namespace longhaul::peer
