#include "master/run_recorder.hpp"

#include <algorithm>
#include <unordered_map>

namespace longhaul::master {
namespace {

// Bytes per second between two cumulative counts; 0 when the counter restarted or no time passed.
double rate(uint64_t before, uint64_t after, double seconds) {
  if (seconds <= 0 || after < before) return 0;
  return static_cast<double>(after - before) / seconds;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

void RunRecorder::add_event(RunEvent event) {
  ++totals_[event.kind];
  events_.push_back(std::move(event));
  while (events_.size() > kMaxEvents) events_.pop_front();
}

void RunRecorder::joined(PeerId id, uint32_t group, double now) {
  joined_at_[id] = now;
  add_event({now, "join", id, group, 0, ""});
}

void RunRecorder::left(PeerId id, uint32_t group, const std::string& reason, bool graceful,
                       double now) {
  const char* kind = graceful                         ? "leave"
                     : starts_with(reason, "evicted") ? "evicted"
                     : starts_with(reason, "dropped") ? "evicted"
                                                      : "lost";
  add_event({now, kind, id, group, last_epoch_, reason});
  joined_at_.erase(id);
  if (auto it = reports_.find(id); it != reports_.end()) {
    departed_data_ += it->second.last.data_sent;
    departed_control_ += it->second.last.control_sent;
    departed_state_ += it->second.last.state_sent;
    reports_.erase(it);
  }
}

void RunRecorder::aborted(uint32_t group, uint64_t epoch, const std::string& reason, double now) {
  // The master sends one ABORT to every member of the group: that is one event.
  auto key = std::make_tuple(group, epoch, reason);
  if (last_abort_ == key) return;
  last_abort_ = std::move(key);
  add_event({now, "abort", 0, group, epoch, reason});
}

void RunRecorder::stats(PeerId id, wire::PeerStatsMsg stats, double now) {
  auto& r = reports_[id];
  if (r.at > 0) {
    r.previous = std::move(r.last);
    r.previous_at = r.at;
  }
  r.last = std::move(stats);
  r.at = now;
}

void RunRecorder::fill_peer(const Membership::Member& m, std::string node, double now,
                            RunStatus* s) const {
  PeerStatus p;
  p.id = m.id;
  p.group = m.group;
  p.host = m.host;
  p.port = m.port;
  p.node = std::move(node);
  p.active = m.state == Membership::State::kActive;
  p.waiting = m.waiting;
  if (auto j = joined_at_.find(m.id); j != joined_at_.end()) p.joined_at = j->second;
  if (auto it = reports_.find(m.id); it != reports_.end()) {
    const Report& r = it->second;
    p.has_stats = true;
    p.stats = r.last;
    p.stats.links.clear();
    p.stats_age_s = std::max(0.0, now - r.at);
    const double dt = r.at - r.previous_at;
    for (const auto& l : r.last.links) {
      LinkStatus link{m.id, l.peer_id, l, 0};
      if (r.previous)
        for (const auto& before : r.previous->links)
          if (before.peer_id == l.peer_id)
            link.send_rate = rate(before.bytes_sent, l.bytes_sent, dt);
      s->links.push_back(link);
    }
    if (r.previous) {
      p.data_send_rate = rate(r.previous->data_sent, r.last.data_sent, dt);
      p.data_recv_rate = rate(r.previous->data_received, r.last.data_received, dt);
    }
    s->data_bytes_sent += r.last.data_sent;
    s->control_bytes_sent += r.last.control_sent;
    s->state_bytes_sent += r.last.state_sent;
    if (r.last.has_engine) {
      ++s->engine_peers;
      s->inner_steps = std::max(s->inner_steps, r.last.inner_steps);
      s->outer_rounds = std::max(s->outer_rounds, r.last.outer_rounds);
      s->delay = std::max<uint64_t>(s->delay, r.last.delay);
    }
  }
  s->peers.push_back(std::move(p));
}

// Within each group, the (revision, digest) most active members report is the reference; a member
// reporting another is marked (ties: the smaller pair wins, so the choice is stable).
void RunRecorder::mark_mismatches(RunStatus* s) {
  using Key = std::pair<uint64_t, uint64_t>;
  std::map<uint32_t, std::map<Key, size_t>> counts;
  for (const auto& p : s->peers)
    if (p.active && p.has_stats && p.stats.has_state)
      ++counts[p.group][{p.stats.state_revision, p.stats.state_digest}];
  for (auto& p : s->peers) {
    if (!p.active || !p.has_stats || !p.stats.has_state) continue;
    const auto& c = counts[p.group];
    const auto popular = std::max_element(
        c.begin(), c.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    p.state_mismatch = popular->first != Key{p.stats.state_revision, p.stats.state_digest};
    if (p.state_mismatch) ++s->groups[p.group].state_mismatches;
  }
}

RunStatus RunRecorder::build_common(const Membership& membership, size_t connections, double now) {
  if (membership.epoch() != last_epoch_) {
    last_epoch_ = membership.epoch();
    add_event({now, "epoch", 0, 0, last_epoch_, ""});
  }
  RunStatus s;
  s.at = now;
  s.uptime_s = std::max(0.0, now - started_at_);
  s.epoch = membership.epoch();
  s.op_sequence = membership.op_sequence();
  s.round_in_progress = membership.round_in_progress();
  s.peers_pending = membership.pending_flag();
  s.connections = connections;
  // Ring positions from one pass over each ring: searching the ring for each member would cost
  // N^2 at every publish, four times per heartbeat interval.
  std::unordered_map<PeerId, int> position;
  for (const auto& [group, ring] : membership.rings()) {
    s.groups[group].group = group;
    s.groups[group].ring = ring;
    for (size_t i = 0; i < ring.size(); ++i) position[ring[i]] = static_cast<int>(i);
  }
  for (const auto& [id, m] : membership.members()) {
    auto& g = s.groups[m.group];
    g.group = m.group;
    ++g.members;
    if (m.state == Membership::State::kActive) ++g.active;
    // A rank of a node (issue 21) shows under its node's name; a peer without one under its host.
    const Node* node = membership.nodes().node_of(id);
    fill_peer(m, node ? node->name : m.host, now, &s);
    if (auto it = position.find(id); it != position.end())
      s.peers.back().ring_position = it->second;
  }
  mark_mismatches(&s);
  s.data_bytes_sent += departed_data_;
  s.control_bytes_sent += departed_control_;
  s.state_bytes_sent += departed_state_;
  double total_rate = 0;
  for (const auto& p : s.peers) total_rate += p.data_send_rate;
  throughput_.push_back({now, total_rate});
  while (throughput_.size() > kMaxThroughputSamples) throughput_.pop_front();
  s.events.assign(events_.begin(), events_.end());
  s.event_totals = totals_;
  s.throughput.assign(throughput_.begin(), throughput_.end());
  return s;
}

}  // namespace longhaul::master
