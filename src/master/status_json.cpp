#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "master/status_render.hpp"

namespace longhaul::master {
namespace {

using nlohmann::json;

json link_json(const wire::LinkStatsEntry& l) {
  return {{"peer", l.peer_id},           {"connections", l.connections},
          {"rtt_us", l.rtt_us},          {"delivery_rate_bytes_per_s", l.delivery_rate},
          {"bytes_sent", l.bytes_sent},  {"bytes_received", l.bytes_received},
          {"retransmits", l.retransmits}};
}

// A member's sync engine: its progress, and the overlap (τ, what it needed, why: sync and step
// time; docs/overlap.md).
json engine_json(const wire::PeerStatsMsg& s) {
  return {{"inner_steps", s.inner_steps},
          {"outer_rounds", s.outer_rounds},
          {"rounds_dropped", s.rounds_dropped},
          {"last_round_participants", s.last_round_participants},
          {"last_round_bytes", s.last_round_bytes},
          {"blocked_s", static_cast<double>(s.blocked_ns) / 1e9},
          {"delay", s.delay},
          {"delay_needed", s.delay_needed},
          {"delay_changes", s.delay_changes},
          {"sync_time_s", static_cast<double>(s.sync_time_ns) / 1e9},
          {"step_time_s", static_cast<double>(s.step_time_ns) / 1e9}};
}

json stats_json(const PeerStatus& p) {
  if (!p.has_stats) return nullptr;
  const auto& s = p.stats;
  json j = {{"age_s", p.stats_age_s},
            {"epoch", s.epoch},
            {"bytes",
             {{"data_sent", s.data_sent},
              {"data_received", s.data_received},
              {"control_sent", s.control_sent},
              {"control_received", s.control_received},
              {"state_sent", s.state_sent},
              {"state_received", s.state_received}}},
            {"data_send_rate_bytes_per_s", p.data_send_rate},
            {"data_recv_rate_bytes_per_s", p.data_recv_rate},
            {"state", nullptr},
            {"engine", nullptr}};
  if (s.has_state)
    j["state"] = {{"revision", s.state_revision},
                  // 64-bit hashes as hex strings: JavaScript numbers cannot hold them.
                  {"hash", fmt::format("{:016x}", s.state_digest)},
                  {"mismatch", p.state_mismatch}};
  if (s.has_engine) j["engine"] = engine_json(s);
  return j;
}

json peer_json(const PeerStatus& p) {
  return {{"id", p.id},
          {"group", p.group},
          {"node", p.node},
          {"address", fmt::format("{}:{}", p.host, p.port)},
          {"state", p.active ? (p.waiting ? "waiting" : "active") : "pending"},
          {"joined_at", p.joined_at},
          {"ring_position", p.ring_position},
          {"stats", stats_json(p)}};
}

// {"TOPOLOGY": {"messages": M, "bytes": B}, ...}: what the master wrote, by message name.
json master_sent_json(const RunStatus& s) {
  json sent = json::object();
  for (const auto& [name, t] : s.master_sent)
    sent[name] = {{"messages", t.messages}, {"bytes", t.bytes}};
  return sent;
}

json groups_json(const RunStatus& s) {
  json groups = json::array();
  for (const auto& [id, g] : s.groups)
    groups.push_back({{"group", id},
                      {"ring", g.ring},
                      {"members", g.members},
                      {"active", g.active},
                      {"state_revision", g.revision ? json(*g.revision) : json(nullptr)},
                      {"state_mismatches", g.state_mismatches}});
  return groups;
}

}  // namespace

std::string status_json(const RunStatus& s) {
  json peers = json::array(), links = json::array(), events = json::array(), plot = json::array();
  for (const auto& p : s.peers) peers.push_back(peer_json(p));
  for (const auto& l : s.links) {
    json j = link_json(l.stats);
    j["from"] = l.from;
    j["to"] = l.to;
    j.erase("peer");
    j["send_rate_bytes_per_s"] = l.send_rate;
    links.push_back(std::move(j));
  }
  for (const auto& e : s.events)
    events.push_back({{"at", e.at},
                      {"kind", e.kind},
                      {"peer", e.peer},
                      {"group", e.group},
                      {"epoch", e.epoch},
                      {"reason", e.reason}});
  for (const auto& t : s.throughput) plot.push_back({t.at, t.bytes_per_s});
  const json doc = {{"at", s.at},
                    {"uptime_s", s.uptime_s},
                    {"epoch", s.epoch},
                    {"op_sequence", s.op_sequence},
                    {"round_in_progress", s.round_in_progress},
                    {"peers_pending", s.peers_pending},
                    {"connections", s.connections},
                    {"node_identity", "node name; host for a peer without a node"},
                    {"groups", groups_json(s)},
                    {"peers", peers},
                    {"links", links},
                    {"events", events},
                    {"event_totals", s.event_totals},
                    {"bytes",
                     {{"data_sent", s.data_bytes_sent},
                      {"control_sent", s.control_bytes_sent},
                      {"state_sent", s.state_bytes_sent}}},
                    {"engine",
                     {{"peers", s.engine_peers},
                      {"inner_steps", s.inner_steps},
                      {"outer_rounds", s.outer_rounds},
                      {"delay", s.delay}}},
                    {"throughput", plot},
                    {"master_sent", master_sent_json(s)}};
  // Reasons come from peers: replace invalid UTF-8 rather than fail.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace longhaul::master
