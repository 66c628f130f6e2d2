#include "peer/peer_stats.hpp"

#include <map>

namespace longhaul::peer {

void StatsBoard::set_state(uint64_t revision, uint64_t digest) {
  MutexLock lock(mu_);
  has_state_ = true;
  revision_ = revision;
  digest_ = digest;
}

void StatsBoard::set_engine(const EngineFigures& figures) {
  MutexLock lock(mu_);
  has_engine_ = true;
  engine_ = figures;
}

void StatsBoard::fill(wire::PeerStatsMsg* out) const {
  MutexLock lock(mu_);
  out->has_state = has_state_;
  out->state_revision = revision_;
  out->state_digest = digest_;
  out->has_engine = has_engine_;
  out->inner_steps = engine_.inner_steps;
  out->outer_rounds = engine_.outer_rounds;
  out->rounds_dropped = engine_.rounds_dropped;
  out->last_round_participants = engine_.last_round_participants;
  out->last_round_bytes = engine_.last_round_bytes;
  out->blocked_ns = engine_.blocked_ns;
  out->delay = engine_.delay;
  out->delay_needed = engine_.delay_needed;
  out->delay_changes = engine_.delay_changes;
  out->sync_time_ns = engine_.sync_time_ns;
  out->step_time_ns = engine_.step_time_ns;
}

namespace {

void add_counter(const std::shared_ptr<net::TrafficCounter>& c, uint64_t* sent,
                 uint64_t* received) {
  if (!c) return;
  *sent = c->sent();
  *received = c->received();
}

}  // namespace

wire::PeerStatsMsg make_peer_stats(const StatsSources& sources, const RingLinks& links) {
  wire::PeerStatsMsg m;
  m.epoch = links.epoch;
  add_counter(sources.data, &m.data_sent, &m.data_received);
  add_counter(sources.control, &m.control_sent, &m.control_received);
  add_counter(sources.state, &m.state_sent, &m.state_received);
  if (sources.board) sources.board->fill(&m);
  std::map<uint64_t, const net::Link*> by_peer;  // ascending ids, each once
  for (size_t rank = 0; rank < links.by_rank.size() && rank < links.ring.size(); ++rank)
    if (links.by_rank[rank]) by_peer.emplace(links.ring[rank], links.by_rank[rank].get());
  for (const auto& [id, link] : by_peer) {
    if (m.links.size() == wire::kMaxStatsLinks) break;
    const net::TcpStats t = link->tcp_stats();
    m.links.push_back({id, t.connections, t.rtt_us, t.delivery_rate, t.bytes_acked,
                       t.bytes_received, t.retransmits});
  }
  return m;
}

}  // namespace longhaul::peer
