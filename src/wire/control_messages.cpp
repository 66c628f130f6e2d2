#include "wire/control_messages.hpp"

#include <algorithm>
#include <concepts>
#include <map>
#include <set>

#include <fmt/format.h>

#include "wire/codec.hpp"
#include "wire/field_visitors.hpp"

namespace longhaul::wire {

// ---- The schema -------------------------------------------------------------------------------
// Each message's fields in wire order, with the limits checked as each is read (field_visitors.hpp
// says what each operation means). The rules that relate fields to each other come after, in
// validate(). The templates live in longhaul::wire, not an anonymous namespace, so that the
// visitors' list() finds an element's fields() by argument-dependent lookup.

// M is T, or const T when the encoder walks the list.
template <class M, class... T>
concept OneOf = (std::same_as<std::remove_const_t<M>, T> || ...);

template <class V, OneOf<uint64_t> M>  // an element of a list of peer ids or block hashes
void fields(V& v, M& id) {
  v.u64(id);
}
template <class V, OneOf<uint32_t> M>  // an element of a list of rail indices
void fields(V& v, M& rail) {
  v.u32(rail);
}
template <class V, OneOf<HeartbeatMsg, ByeMsg> M>
void fields(V&, M&) {}

template <class V, OneOf<RegisterMsg> M>
void fields(V& v, M& m) {
  v.u32(m.group);
  v.string(m.advertised_host, kMaxHostBytes);
  v.u16(m.advertised_port);
  v.string(m.node, kMaxNodeNameBytes);
  v.u32(m.rail);
  v.u32(m.rails);
  v.boolean(m.full_mesh);
}
template <class V, OneOf<WelcomeMsg> M>
void fields(V& v, M& m) {
  v.u64(m.peer_id);
  v.u32(m.heartbeat_interval_ms);
  v.u32(m.heartbeat_misses);
}
template <class V, OneOf<UpdateTopologyMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.boolean(m.admit_joiners);
}
template <class V, OneOf<TopologyUnchangedMsg, StateCompleteMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
}
template <class V, OneOf<MemberInfo> M>
void fields(V& v, M& m) {
  v.u64(m.peer_id);
  v.u32(m.group);
  v.string(m.host, kMaxHostBytes);
  v.u16(m.port);
}
template <class V, OneOf<RingInfo> M>
void fields(V& v, M& m) {
  v.u32(m.group);
  v.list(m.order, kMaxMembers);
}
template <class V, OneOf<TopologyMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.list(m.members, kMaxMembers);
  v.list(m.rings, kMaxMembers);
  v.u64(m.base_epoch);
  v.list(m.removed, kMaxMembers);
}
template <class V, OneOf<LinksReadyMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.list(m.unreachable, kMaxMembers);
}
template <class V, OneOf<EpochCommitMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u64(m.op_sequence);
  v.boolean(m.peers_pending);
}
template <class V, OneOf<AbortMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u32(m.group);
  v.status(m.code, StatusField::kFailure);
  v.string(m.reason, kMaxReasonBytes);
}
template <class V, OneOf<PendingChangedMsg> M>
void fields(V& v, M& m) {
  v.boolean(m.pending);
}
template <class V, OneOf<ReportPeerLostMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u64(m.peer_id);
  v.string(m.reason, kMaxReasonBytes);
}
template <class V, OneOf<LeaveMsg> M>
void fields(V& v, M& m) {
  v.string(m.reason, kMaxReasonBytes);
}
template <class V, OneOf<RemovedMsg> M>
void fields(V& v, M& m) {
  v.status(m.code, StatusField::kFailure);
  v.string(m.reason, kMaxReasonBytes);
}
template <class V, OneOf<PeerHelloMsg, PeerHelloAckMsg, StateSourceLostMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u64(m.peer_id);
}

// Shared state.
template <class V, OneOf<TensorReport> M>
void fields(V& v, M& t) {
  v.string(t.name, kMaxTensorNameBytes, 1);  // never empty
  v.u8(t.dtype);
  v.u64(t.count);
  v.list(t.block_hashes);
  // One bit per block: never more bytes than the blocks need (validate() wants exactly that).
  v.bytes(t.compressible, static_cast<uint32_t>((t.block_hashes.size() + 7) / 8));
}
template <class V, OneOf<StateReportMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u32(m.block_bytes);
  v.u64(m.revision);
  v.enumeration(m.strategy, SyncStrategy::kSendOnly);
  v.list(m.tensors, kMaxTensors);
}
template <class V, OneOf<StateSource> M>
void fields(V& v, M& s) {
  v.u64(s.peer_id);
  v.string(s.host, kMaxHostBytes);
  v.u16(s.port);
}
template <class V, OneOf<BlockToFetch> M>
void fields(V& v, M& b) {
  v.u32(b.index);
  v.u64(b.hash);
  v.boolean(b.compressible);
}
template <class V, OneOf<TensorFetch> M>
void fields(V& v, M& f) {
  v.u32(f.tensor);
  v.list(f.sources, kMaxMembers);
  v.list(f.blocks);
}
template <class V, OneOf<StatePlanMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.status(m.code, StatusField::kAny);
  v.string(m.reason, kMaxReasonBytes);
  v.u64(m.revision);
  v.list(m.sources, kMaxMembers);
  v.list(m.fetches, kMaxTensors);
}
template <class V, OneOf<StateDoneMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.status(m.code, StatusField::kAny);
  v.string(m.reason, kMaxReasonBytes);
}
template <class V, OneOf<StateFetchMsg> M>
void fields(V& v, M& m) {
  v.u64(m.request);
  v.u32(m.tensor);
  v.u32(m.first_block);
  v.u32(m.block_count);
  v.boolean(m.compressed);
}
template <class V, OneOf<CompressedBlock> M>
void fields(V& v, M& b) {
  v.boolean(b.zstd);
  v.bytes(b.bytes, kMaxStateBlockBytes);
}
template <class V, OneOf<StateBlocksZMsg> M>
void fields(V& v, M& m) {
  v.u64(m.request);
  v.list(m.blocks, kMaxBlocksPerCompressedFetch);
  v.u64(m.compress_ns);
}
template <class V, OneOf<StateFetchFailedMsg> M>
void fields(V& v, M& m) {
  v.u64(m.request);
  v.status(m.code, StatusField::kFailure);
  v.string(m.reason, kMaxReasonBytes);
}

// Batch all-reduce.
template <class V, OneOf<BatchReportMsg, BatchDecisionMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u64(m.attempt);
  v.boolean(m.ok);
}

// Nodes.
template <class V, OneOf<NodeWaitingMsg> M>
void fields(V& v, M& m) {
  v.u32(m.rails);
  v.list(m.registered, kMaxRails);
}

template <class V, OneOf<NodeAgreeMsg> M>
void fields(V& v, M& m) {
  v.u64(m.point);
  v.u32(m.kind);
  v.u32(m.flags);
}

template <class V, OneOf<NodeAgreedMsg> M>
void fields(V& v, M& m) {
  v.u64(m.point);
  v.u32(m.flags);
}

// Observability.
template <class V, OneOf<LinkStatsEntry> M>
void fields(V& v, M& l) {
  v.u64(l.peer_id);
  v.u32(l.connections);
  v.u64(l.rtt_us);
  v.u64(l.delivery_rate);
  v.u64(l.bytes_sent);
  v.u64(l.bytes_received);
  v.u64(l.retransmits);
}
template <class V, OneOf<PeerStatsMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u64(m.data_sent);
  v.u64(m.data_received);
  v.u64(m.control_sent);
  v.u64(m.control_received);
  v.u64(m.state_sent);
  v.u64(m.state_received);
  v.boolean(m.has_state);
  v.u64(m.state_revision);
  v.u64(m.state_digest);
  v.boolean(m.has_engine);
  v.u64(m.inner_steps);
  v.u64(m.outer_rounds);
  v.u64(m.rounds_dropped);
  v.u64(m.last_round_participants);
  v.u64(m.last_round_bytes);
  v.u64(m.blocked_ns);
  v.list(m.links, kMaxStatsLinks);
}

// Master restart.
template <class V, OneOf<RejoinMsg> M>
void fields(V& v, M& m) {
  v.u64(m.peer_id);
  v.u32(m.group);
  v.string(m.advertised_host, kMaxHostBytes);
  v.u16(m.advertised_port);
  v.string(m.node, kMaxNodeNameBytes);
  v.u32(m.rail);
  v.u32(m.rails);
  v.boolean(m.full_mesh);
  v.u64(m.epoch);
  v.u32(m.world);
  v.list(m.ring, kMaxMembers);
  v.u64(m.proposed_epoch);
  v.list(m.proposed_ring, kMaxMembers);
  v.u64(m.decided_attempt);
  v.boolean(m.decided_ok);
  v.u64(m.node_answered);
  v.u32(m.node_answer);
}

namespace {

constexpr uint8_t kFirstType = static_cast<uint8_t>(ControlType::kRegister);
constexpr uint8_t kLastType = static_cast<uint8_t>(ControlType::kNodeAgreed);
static_assert(std::variant_size_v<ControlMessage> == kLastType - kFirstType + 1);

// ---- The rules between fields, checked once a message is read whole ---------------------------

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

// Links once each, in ascending order, never to peer 0.
Status validate(const PeerStatsMsg& m) {
  for (size_t i = 0; i < m.links.size(); ++i) {
    if (m.links[i].peer_id == 0) return protocol_error("PEER_STATS: a link to peer 0");
    if (i > 0 && m.links[i].peer_id <= m.links[i - 1].peer_id)
      return protocol_error(fmt::format("PEER_STATS: link to peer {} out of order or listed twice",
                                        m.links[i].peer_id));
  }
  return Status::ok();
}

template <size_t I>
Status decode_alternative(Reader& r, size_t index, ControlMessage* out) {
  if constexpr (I < std::variant_size_v<ControlMessage>) {
    if (index == I) {
      std::variant_alternative_t<I, ControlMessage> m;
      FieldReader v(r);
      fields(v, m);
      LH_RETURN_IF_ERROR(v.result());
      LH_RETURN_IF_ERROR(validate(m));
      *out = std::move(m);
      return Status::ok();
    }
    return decode_alternative<I + 1>(r, index, out);
  } else {
    return internal_error("unreachable");
  }
}

}  // namespace

const char* control_type_name(ControlType t) {
  switch (t) {
    case ControlType::kRegister:
      return "REGISTER";
    case ControlType::kWelcome:
      return "WELCOME";
    case ControlType::kHeartbeat:
      return "HEARTBEAT";
    case ControlType::kUpdateTopology:
      return "UPDATE_TOPOLOGY";
    case ControlType::kTopologyUnchanged:
      return "TOPOLOGY_UNCHANGED";
    case ControlType::kTopology:
      return "TOPOLOGY";
    case ControlType::kLinksReady:
      return "LINKS_READY";
    case ControlType::kEpochCommit:
      return "EPOCH_COMMIT";
    case ControlType::kAbort:
      return "ABORT";
    case ControlType::kPendingChanged:
      return "PENDING_CHANGED";
    case ControlType::kReportPeerLost:
      return "REPORT_PEER_LOST";
    case ControlType::kLeave:
      return "LEAVE";
    case ControlType::kBye:
      return "BYE";
    case ControlType::kRemoved:
      return "REMOVED";
    case ControlType::kPeerHello:
      return "PEER_HELLO";
    case ControlType::kPeerHelloAck:
      return "PEER_HELLO_ACK";
    case ControlType::kStateReport:
      return "STATE_REPORT";
    case ControlType::kStatePlan:
      return "STATE_PLAN";
    case ControlType::kStateDone:
      return "STATE_DONE";
    case ControlType::kStateComplete:
      return "STATE_COMPLETE";
    case ControlType::kStateFetch:
      return "STATE_FETCH";
    case ControlType::kStateBlocksZ:
      return "STATE_BLOCKS_Z";
    case ControlType::kStateFetchFailed:
      return "STATE_FETCH_FAILED";
    case ControlType::kBatchReport:
      return "BATCH_REPORT";
    case ControlType::kBatchDecision:
      return "BATCH_DECISION";
    case ControlType::kStateSourceLost:
      return "STATE_SOURCE_LOST";
    case ControlType::kNodeWaiting:
      return "NODE_WAITING";
    case ControlType::kPeerStats:
      return "PEER_STATS";
    case ControlType::kRejoin:
      return "REJOIN";
    case ControlType::kNodeAgree:
      return "NODE_AGREE";
    case ControlType::kNodeAgreed:
      return "NODE_AGREED";
  }
  return "UNKNOWN";
}

ControlType control_type(const ControlMessage& m) {
  return static_cast<ControlType>(m.index() + kFirstType);
}

std::vector<std::byte> encode_control(const ControlMessage& m) {
  Writer w;
  w.u8(static_cast<uint8_t>(control_type(m)));
  FieldWriter v(w);
  std::visit([&v](const auto& msg) { fields(v, msg); }, m);
  return w.take();
}

Result<ControlMessage> decode_control(std::span<const std::byte> bytes) {
  Reader r(bytes);
  uint8_t tag = 0;
  if (Status s = r.u8(&tag); !s) return protocol_error("empty control message");
  if (tag < kFirstType || tag > kLastType)
    return protocol_error(fmt::format("unknown control message type {}", tag));
  const auto type = static_cast<ControlType>(tag);
  ControlMessage out;
  Status s = decode_alternative<0>(r, tag - kFirstType, &out);
  if (s) s = r.expect_end();
  if (!s)
    return protocol_error(
        fmt::format("malformed {} message: {}", control_type_name(type), s.message()));
  return out;
}

}  // namespace longhaul::wire
