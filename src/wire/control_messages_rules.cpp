// The rules between a control message's fields, checked once it is read whole: what the schema
// (control_messages.cpp), which checks each field's limits as it is read, cannot say field by
// field. Each message type without rules of its own passes.
#include "wire/control_messages_rules.hpp"

#include <concepts>
#include <map>
#include <set>

#include <fmt/format.h>

namespace longhaul::wire {
namespace {

// M is one of T.
template <class M, class... T>
concept OneOf = (std::same_as<M, T> || ...);

template <class M>
Status validate(const M&) {
  return Status::ok();
}

Status validate(const WelcomeMsg& m) {
  if (m.peer_id == 0) return protocol_error("peer id 0 is reserved");
  if (m.heartbeat_interval_ms == 0 || m.heartbeat_misses == 0)
    return protocol_error("heartbeat interval and misses must be positive");
  return Status::ok();
}

// A rail inside its node; a peer without a node is rail 0 of 1.
Status validate_rail(const std::string& node, uint32_t rail, uint32_t rails) {
  if (rails == 0 || rails > kMaxRails)
    return protocol_error(fmt::format("a node of {} rails (1..{})", rails, kMaxRails));
  if (rail >= rails)
    return protocol_error(
        fmt::format("rail {} out of range: the node has {} rails (0..{})", rail, rails, rails - 1));
  if (node.empty() && rails != 1)
    return protocol_error(fmt::format("{} rails without a node name", rails));
  return Status::ok();
}

Status validate(const RegisterMsg& m) {
  return validate_rail(m.node, m.rail, m.rails);
}

// A ring that names `self` once and no peer twice or as 0.
Status validate_ring(const std::vector<uint64_t>& ring, uint64_t self, const char* what) {
  std::set<uint64_t> seen;
  for (uint64_t id : ring)
    if (id == 0 || !seen.insert(id).second)
      return protocol_error(fmt::format("REJOIN: the {} names peer {} twice or peer 0", what, id));
  if (!seen.contains(self))
    return protocol_error(fmt::format("REJOIN: the {} does not name the peer itself", what));
  return Status::ok();
}

Status validate(const RejoinMsg& m) {
  if (m.peer_id == 0) return protocol_error("REJOIN: peer id 0 is reserved");
  if (m.advertised_port == 0) return protocol_error("REJOIN: data port 0");
  if (m.epoch == 0) return protocol_error("REJOIN: epoch 0 (a peer never admitted registers)");
  if (m.world < m.ring.size() || m.world > kMaxMembers)
    return protocol_error("REJOIN: a world smaller than the ring or beyond the member limit");
  LH_RETURN_IF_ERROR(validate_rail(m.node, m.rail, m.rails));
  LH_RETURN_IF_ERROR(validate_ring(m.ring, m.peer_id, "ring"));
  if (m.proposed_epoch == 0) {
    if (!m.proposed_ring.empty()) return protocol_error("REJOIN: a proposed ring without an epoch");
  } else {
    if (m.proposed_epoch <= m.epoch)
      return protocol_error("REJOIN: a proposal not newer than the committed epoch");
    LH_RETURN_IF_ERROR(validate_ring(m.proposed_ring, m.peer_id, "proposed ring"));
  }
  if (m.node_answered != 0 && m.rails < 2)
    return protocol_error(
        "REJOIN: a node agreement answer from a peer of no node of several rails");
  if (m.node_answered == 0 && m.node_answer != 0)
    return protocol_error("REJOIN: a node agreement answer without its point");
  return Status::ok();
}

// Some rails registered, fewer than the node has, each once in ascending order.
Status validate(const NodeWaitingMsg& m) {
  if (m.rails == 0 || m.rails > kMaxRails)
    return protocol_error(fmt::format("a node of {} rails (1..{})", m.rails, kMaxRails));
  if (m.registered.empty() || m.registered.size() >= m.rails)
    return protocol_error(
        fmt::format("{} of {} rails registered in a waiting node", m.registered.size(), m.rails));
  for (size_t i = 0; i < m.registered.size(); ++i) {
    if (m.registered[i] >= m.rails)
      return protocol_error(fmt::format("rail {} of a node of {} rails", m.registered[i], m.rails));
    if (i > 0 && m.registered[i] <= m.registered[i - 1])
      return protocol_error("registered rails out of order or listed twice");
  }
  return Status::ok();
}

// Each member once, and in exactly one ring: its own group's. A change to a base epoch names
// the peers it removes once each, in ascending order, none of them among its new members.
Status validate(const TopologyMsg& m) {
  std::map<uint64_t, uint32_t> group_of;
  for (const auto& member : m.members) {
    if (member.peer_id == 0) return protocol_error("member with peer id 0");
    if (!group_of.emplace(member.peer_id, member.group).second)
      return protocol_error(fmt::format("peer {} listed twice", member.peer_id));
  }
  std::set<uint64_t> placed;
  std::set<uint32_t> groups;
  for (const auto& ring : m.rings) {
    if (!groups.insert(ring.group).second)
      return protocol_error(fmt::format("two rings for group {}", ring.group));
    if (ring.order.empty())
      return protocol_error(fmt::format("empty ring for group {}", ring.group));
    for (uint64_t id : ring.order) {
      auto it = group_of.find(id);
      if (it == group_of.end())
        return protocol_error(fmt::format("ring names unknown peer {}", id));
      if (it->second != ring.group)
        return protocol_error(fmt::format("peer {} of group {} placed in the ring of group {}", id,
                                          it->second, ring.group));
      if (!placed.insert(id).second) return protocol_error(fmt::format("peer {} placed twice", id));
    }
  }
  if (placed.size() != m.members.size())
    return protocol_error("a member is missing from its group's ring");
  if (m.base_epoch == 0 && !m.removed.empty())
    return protocol_error("a whole proposal that removes peers");
  if (m.base_epoch != 0 && m.base_epoch >= m.epoch)
    return protocol_error(
        fmt::format("a change to epoch {} proposing epoch {}", m.base_epoch, m.epoch));
  for (size_t i = 0; i < m.removed.size(); ++i) {
    if (m.removed[i] == 0 || (i > 0 && m.removed[i] <= m.removed[i - 1]))
      return protocol_error("removed peers out of order, listed twice or 0");
    if (group_of.contains(m.removed[i]))
      return protocol_error(fmt::format("peer {} both removed and new", m.removed[i]));
  }
  return Status::ok();
}

// Tensors in ascending name order, each named once, of a known dtype, with one bitmap bit per
// block.
Status validate(const StateReportMsg& m) {
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const auto& t = m.tensors[i];
    if (i > 0 && !(m.tensors[i - 1].name < t.name))
      return protocol_error(fmt::format("tensor '{}' out of order or listed twice", t.name));
    if (t.dtype > 9)
      return protocol_error(fmt::format("tensor '{}': unknown dtype {}", t.name, t.dtype));
    if (t.compressible.size() != (t.block_hashes.size() + 7) / 8)
      return protocol_error(
          fmt::format("tensor '{}': compressibility bitmap of {} bytes for {} blocks", t.name,
                      t.compressible.size(), t.block_hashes.size()));
  }
  return Status::ok();
}

// A tensor's fetch names listed sources and ascending blocks, at least one of each.
Status validate_fetch(const TensorFetch& f, const std::set<uint64_t>& listed) {
  if (f.sources.empty())
    return protocol_error(fmt::format("fetch of tensor {} without a source", f.tensor));
  for (uint64_t id : f.sources)
    if (!listed.contains(id))
      return protocol_error(fmt::format("fetch names unlisted source {}", id));
  if (f.blocks.empty())
    return protocol_error(fmt::format("fetch of tensor {} without blocks", f.tensor));
  for (size_t b = 1; b < f.blocks.size(); ++b)
    if (f.blocks[b].index <= f.blocks[b - 1].index)
      return protocol_error(fmt::format("blocks of tensor {} out of order", f.tensor));
  return Status::ok();
}

// Sources once each, reachable (no peer id or port 0); fetches in ascending tensor order; a failed
// plan fetches nothing.
Status validate(const StatePlanMsg& m) {
  std::set<uint64_t> ids;
  for (const auto& s : m.sources) {
    if (s.peer_id == 0 || s.port == 0) return protocol_error("source with peer id or port 0");
    if (!ids.insert(s.peer_id).second)
      return protocol_error(fmt::format("source {} listed twice", s.peer_id));
  }
  for (size_t i = 0; i < m.fetches.size(); ++i) {
    const auto& f = m.fetches[i];
    if (i > 0 && f.tensor <= m.fetches[i - 1].tensor)
      return protocol_error(
          fmt::format("fetch of tensor {} out of order or listed twice", f.tensor));
    LH_RETURN_IF_ERROR(validate_fetch(f, ids));
  }
  if (m.code != LH_OK && !m.fetches.empty()) return protocol_error("a failed plan with fetches");
  return Status::ok();
}

Status validate(const StateFetchMsg& m) {
  if (m.block_count == 0) return protocol_error("fetch of 0 blocks");
  if (m.compressed && m.block_count > kMaxBlocksPerCompressedFetch)
    return protocol_error(fmt::format("compressed fetch of {} blocks (at most {})", m.block_count,
                                      kMaxBlocksPerCompressedFetch));
  if (uint64_t{m.first_block} + m.block_count > UINT32_MAX)
    return protocol_error("block range overflows");
  return Status::ok();
}

// Only admitted peers run batches (epoch 0 is "not admitted") and attempts count from 1.
template <OneOf<BatchReportMsg, BatchDecisionMsg> M>
Status validate(const M& m) {
  if (m.epoch == 0) return protocol_error("batch outcome for epoch 0");
  if (m.attempt == 0) return protocol_error("batch attempt 0 (attempts count from 1)");
  return Status::ok();
}

// Agreement points count from 1 on every rail.
template <OneOf<NodeAgreeMsg, NodeAgreedMsg> M>
Status validate(const M& m) {
  if (m.point == 0) return protocol_error("node agreement point 0 (points count from 1)");
  return Status::ok();
}

// Only admitted peers sync state (epoch 0 is "not admitted"), and peer ids count from 1.
Status validate(const StateSourceLostMsg& m) {
  if (m.epoch == 0) return protocol_error("STATE_SOURCE_LOST for epoch 0");
  if (m.peer_id == 0) return protocol_error("STATE_SOURCE_LOST for peer 0");
  return Status::ok();
}

// Only admitted peers run collectives (epoch 0 is "not admitted").
Status validate(const AbortRequestMsg& m) {
  if (m.epoch == 0) return protocol_error("ABORT_REQUEST for epoch 0");
  return Status::ok();
}

// Whether any sync-engine figure is set: a peer without an engine has none to report (its board
// sends zeros, peer_stats.cpp).
bool has_engine_figures(const PeerStatsMsg& m) {
  const uint64_t figures[] = {
      m.inner_steps,      m.outer_rounds, m.rounds_dropped, m.last_round_participants,
      m.last_round_bytes, m.blocked_ns,   m.delay,          m.delay_needed,
      m.delay_changes,    m.sync_time_ns, m.step_time_ns};
  for (uint64_t f : figures)
    if (f != 0) return true;
  return false;
}

// Engine figures only with an engine; links once each, in ascending order, never to peer 0.
Status validate(const PeerStatsMsg& m) {
  if (!m.has_engine && has_engine_figures(m))
    return protocol_error("PEER_STATS: sync engine figures without a sync engine");
  for (size_t i = 0; i < m.links.size(); ++i) {
    if (m.links[i].peer_id == 0) return protocol_error("PEER_STATS: a link to peer 0");
    if (i > 0 && m.links[i].peer_id <= m.links[i - 1].peer_id)
      return protocol_error(fmt::format("PEER_STATS: link to peer {} out of order or listed twice",
                                        m.links[i].peer_id));
  }
  return Status::ok();
}

}  // namespace

Status check_rules(const ControlMessage& m) {
  return std::visit([](const auto& msg) { return validate(msg); }, m);
}

}  // namespace longhaul::wire
