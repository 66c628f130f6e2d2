#include <fmt/format.h>

#include "common/log.hpp"
#include "common/metrics_text.hpp"
#include "master/status_render.hpp"

namespace longhaul::master {
namespace {

using Type = MetricsText::Type;
using Labels = MetricsText::Labels;

// Keeps the first encoder error (a misspelt name in this file) instead of checking every call.
class Writer {
 public:
  void family(std::string_view name, Type type, std::string_view help) {
    keep(text_.family(name, type, help));
  }
  void sample(double value, const Labels& labels = {}) { keep(text_.sample(value, labels)); }
  Result<std::string> take() {
    if (!first_) return first_;
    return text_.text();
  }

 private:
  void keep(Status s) {
    if (first_ && !s) first_ = std::move(s);
  }
  MetricsText text_;
  Status first_;
};

Labels peer_labels(const PeerStatus& p) {
  return {{"peer", std::to_string(p.id)}, {"group", std::to_string(p.group)}, {"node", p.node}};
}

void run_metrics(const RunStatus& s, Writer& w) {
  w.family("longhaul_master_up", Type::kGauge, "1 while the master serves this endpoint.");
  w.sample(1);
  w.family("longhaul_master_uptime_seconds", Type::kGauge, "Seconds since the master started.");
  w.sample(s.uptime_s);
  w.family("longhaul_master_epoch", Type::kGauge, "The committed epoch (0 before the first).");
  w.sample(static_cast<double>(s.epoch));
  w.family("longhaul_master_round_in_progress", Type::kGauge,
           "1 while a reconfiguration round is proposed and not yet committed.");
  w.sample(s.round_in_progress ? 1 : 0);
  w.family("longhaul_master_peers_pending", Type::kGauge,
           "1 while a peer waits to join or a ring must be re-formed.");
  w.sample(s.peers_pending ? 1 : 0);
  w.family("longhaul_master_connections", Type::kGauge, "Control connections open at the master.");
  w.sample(static_cast<double>(s.connections));
  w.family("longhaul_master_events_total", Type::kCounter,
           "Membership events since the master started, by kind (join, leave, lost, evicted, "
           "abort, epoch).");
  for (const auto& [kind, n] : s.event_totals) w.sample(static_cast<double>(n), {{"kind", kind}});
  w.family("longhaul_master_sent_messages_total", Type::kCounter,
           "Control messages the master wrote since it started, by message type.");
  for (const auto& [name, t] : s.master_sent)
    w.sample(static_cast<double>(t.messages), {{"type", name}});
  w.family("longhaul_master_sent_bytes_total", Type::kCounter,
           "Bytes of the control messages the master wrote (frame headers included), by type.");
  for (const auto& [name, t] : s.master_sent)
    w.sample(static_cast<double>(t.bytes), {{"type", name}});
  w.family("longhaul_run_bytes_sent_total", Type::kCounter,
           "Bytes the peers sent, as they report them (departed peers included), by kind of link.");
  w.sample(static_cast<double>(s.data_bytes_sent), {{"kind", "data"}});
  w.sample(static_cast<double>(s.control_bytes_sent), {{"kind", "control"}});
  w.sample(static_cast<double>(s.state_bytes_sent), {{"kind", "state"}});
  w.family("longhaul_run_throughput_bytes_per_second", Type::kGauge,
           "Data bytes sent per second, summed over the reporting peers.");
  w.sample(s.throughput.empty() ? 0 : s.throughput.back().bytes_per_s);
  w.family("longhaul_run_engine_inner_steps", Type::kGauge,
           "The largest inner step a sync engine reports.");
  w.sample(static_cast<double>(s.inner_steps));
  w.family("longhaul_run_engine_outer_rounds", Type::kGauge,
           "The most outer rounds a sync engine reports applied.");
  w.sample(static_cast<double>(s.outer_rounds));
  w.family("longhaul_run_engine_delay_steps", Type::kGauge,
           "The largest round delay tau a sync engine reports.");
  w.sample(static_cast<double>(s.delay));
}

void group_metrics(const RunStatus& s, Writer& w) {
  w.family("longhaul_group_members", Type::kGauge, "Members of each peer group, by state.");
  for (const auto& [id, g] : s.groups) {
    w.sample(static_cast<double>(g.active), {{"group", std::to_string(id)}, {"state", "active"}});
    w.sample(static_cast<double>(g.members - g.active),
             {{"group", std::to_string(id)}, {"state", "pending"}});
  }
  w.family("longhaul_group_state_mismatches", Type::kGauge,
           "Active members whose shared state differs from their group's most common one.");
  for (const auto& [id, g] : s.groups)
    w.sample(static_cast<double>(g.state_mismatches), {{"group", std::to_string(id)}});
}

void peer_metrics(const RunStatus& s, Writer& w) {
  w.family("longhaul_peer_info", Type::kGauge,
           "One per member: its group, node (its host when it has none), state, ring position.");
  for (const auto& p : s.peers) {
    Labels l = peer_labels(p);
    l.emplace_back("state", p.active ? (p.waiting ? "waiting" : "active") : "pending");
    l.emplace_back("ring_position", std::to_string(p.ring_position));
    w.sample(1, l);
  }
  w.family("longhaul_peer_bytes_sent_total", Type::kCounter,
           "Bytes a member sent since its communicator was created, by kind of link.");
  for (const auto& p : s.peers)
    if (p.has_stats)
      for (const auto& [kind, v] : {std::pair{"data", p.stats.data_sent},
                                    {"control", p.stats.control_sent},
                                    {"state", p.stats.state_sent}}) {
        Labels l = peer_labels(p);
        l.emplace_back("kind", kind);
        w.sample(static_cast<double>(v), l);
      }
  w.family("longhaul_peer_bytes_received_total", Type::kCounter,
           "Bytes a member received since its communicator was created, by kind of link.");
  for (const auto& p : s.peers)
    if (p.has_stats)
      for (const auto& [kind, v] : {std::pair{"data", p.stats.data_received},
                                    {"control", p.stats.control_received},
                                    {"state", p.stats.state_received}}) {
        Labels l = peer_labels(p);
        l.emplace_back("kind", kind);
        w.sample(static_cast<double>(v), l);
      }
  w.family("longhaul_peer_report_age_seconds", Type::kGauge,
           "Seconds since the member's last PEER_STATS.");
  for (const auto& p : s.peers)
    if (p.has_stats) w.sample(p.stats_age_s, peer_labels(p));
}

void peer_progress_metrics(const RunStatus& s, Writer& w) {
  w.family("longhaul_peer_state_revision", Type::kGauge,
           "The shared-state revision after the member's last state sync.");
  for (const auto& p : s.peers)
    if (p.has_stats && p.stats.has_state)
      w.sample(static_cast<double>(p.stats.state_revision), peer_labels(p));
  w.family("longhaul_peer_state_mismatch", Type::kGauge,
           "1 when the member's shared state differs from its group's most common one.");
  for (const auto& p : s.peers)
    if (p.has_stats && p.stats.has_state) w.sample(p.state_mismatch ? 1 : 0, peer_labels(p));
}

// Each member's sync engine: its progress, and the overlap (docs/overlap.md: τ, the steps its
// last cycle needed, and why: the sync and step times).
void engine_metrics(const RunStatus& s, Writer& w) {
  struct Figure {
    const char* name;
    Type type;
    const char* help;
    double (*value)(const wire::PeerStatsMsg&);
  };
  static const Figure kFigures[] = {
      {"longhaul_peer_engine_inner_steps", Type::kGauge, "Inner steps of the member's sync engine.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.inner_steps); }},
      {"longhaul_peer_engine_outer_rounds", Type::kGauge, "Outer rounds the member applied.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.outer_rounds); }},
      {"longhaul_peer_engine_last_round_participants", Type::kGauge,
       "Peers whose contribution the member's last round counted.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.last_round_participants); }},
      {"longhaul_peer_engine_last_round_bytes", Type::kGauge,
       "Data bytes the member moved for its last outer round.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.last_round_bytes); }},
      {"longhaul_peer_engine_blocked_seconds_total", Type::kCounter,
       "Seconds the member's trainer waited inside the sync engine.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.blocked_ns) / 1e9; }},
      {"longhaul_peer_engine_delay_steps", Type::kGauge,
       "The round delay tau in effect (steps from a round's launch to its apply), the group's.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.delay); }},
      {"longhaul_peer_engine_delay_needed_steps", Type::kGauge,
       "The most steps any member needed for a sync over the last cycle (0: none reported).",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.delay_needed); }},
      {"longhaul_peer_engine_delay_changes_total", Type::kCounter,
       "Times the member's engine changed tau.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.delay_changes); }},
      {"longhaul_peer_engine_sync_seconds", Type::kGauge,
       "The member's last applied round, from its launch to its result ready there.",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.sync_time_ns) / 1e9; }},
      {"longhaul_peer_engine_step_seconds", Type::kGauge,
       "The member's trainer compute time per inner step (a weighted mean).",
       [](const wire::PeerStatsMsg& m) { return static_cast<double>(m.step_time_ns) / 1e9; }},
  };
  for (const auto& f : kFigures) {
    w.family(f.name, f.type, f.help);
    for (const auto& p : s.peers)
      if (p.has_stats && p.stats.has_engine) w.sample(f.value(p.stats), peer_labels(p));
  }
}

void link_metrics(const RunStatus& s, Writer& w) {
  auto labels = [](const LinkStatus& l) {
    return Labels{{"from", std::to_string(l.from)}, {"to", std::to_string(l.to)}};
  };
  w.family("longhaul_link_rtt_seconds", Type::kGauge,
           "Smoothed round-trip time of a data link (its fastest connection), from TCP_INFO.");
  for (const auto& l : s.links) w.sample(static_cast<double>(l.stats.rtt_us) / 1e6, labels(l));
  w.family("longhaul_link_delivery_rate_bytes_per_second", Type::kGauge,
           "The kernel's delivery-rate estimate of a data link, summed over its connections.");
  for (const auto& l : s.links) w.sample(static_cast<double>(l.stats.delivery_rate), labels(l));
  w.family("longhaul_link_send_rate_bytes_per_second", Type::kGauge,
           "Bytes per second the far end acknowledged between the last two reports.");
  for (const auto& l : s.links) w.sample(l.send_rate, labels(l));
  w.family("longhaul_link_bytes_sent_total", Type::kCounter,
           "Payload bytes the far end of a data link acknowledged (TCP_INFO).");
  for (const auto& l : s.links) w.sample(static_cast<double>(l.stats.bytes_sent), labels(l));
  w.family("longhaul_link_retransmits_total", Type::kCounter,
           "TCP segments a data link retransmitted.");
  for (const auto& l : s.links) w.sample(static_cast<double>(l.stats.retransmits), labels(l));
}

}  // namespace

std::string status_metrics(const RunStatus& status) {
  Writer w;
  run_metrics(status, w);
  group_metrics(status, w);
  peer_metrics(status, w);
  peer_progress_metrics(status, w);
  engine_metrics(status, w);
  link_metrics(status, w);
  auto text = w.take();
  if (!text) {
    log::error("master", "metrics encoder: {}", text.status().to_string());
    return "";
  }
  return std::move(*text);
}

}  // namespace longhaul::master
