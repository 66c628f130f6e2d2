#include "wire/control_messages.hpp"

#include <concepts>

#include <fmt/format.h>

#include "wire/codec.hpp"
#include "wire/control_messages_rules.hpp"
#include "wire/field_visitors.hpp"

namespace longhaul::wire {

// ---- The schema -------------------------------------------------------------------------------
// Each message's fields in wire order, with the limits checked as each is read (field_visitors.hpp
// says what each operation means). The rules that relate fields to each other are checked once a
// message is read whole (control_messages_rules.cpp). The templates live in longhaul::wire, not an
// anonymous namespace, so that the visitors' list() finds an element's fields() by
// argument-dependent lookup.

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
template <class V, OneOf<AbortRequestMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
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
template <class V, OneOf<BatchReportMsg> M>
void fields(V& v, M& m) {
  v.u64(m.epoch);
  v.u64(m.attempt);
  v.boolean(m.ok);
  v.boolean(m.late);
}
template <class V, OneOf<BatchDecisionMsg> M>
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
  v.u32(m.delay);
  v.u32(m.delay_needed);
  v.u64(m.delay_changes);
  v.u64(m.sync_time_ns);
  v.u64(m.step_time_ns);
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
constexpr uint8_t kLastType = static_cast<uint8_t>(ControlType::kAbortRequest);
static_assert(std::variant_size_v<ControlMessage> == kLastType - kFirstType + 1);

template <size_t I>
Status decode_alternative(Reader& r, size_t index, ControlMessage* out) {
  if constexpr (I < std::variant_size_v<ControlMessage>) {
    if (index == I) {
      std::variant_alternative_t<I, ControlMessage> m;
      FieldReader v(r);
      fields(v, m);
      LH_RETURN_IF_ERROR(v.result());
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
    case ControlType::kAbortRequest:
      return "ABORT_REQUEST";
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
  if (s) s = check_rules(out);
  if (s) s = r.expect_end();
  if (!s)
    return protocol_error(
        fmt::format("malformed {} message: {}", control_type_name(type), s.message()));
  return out;
}

}  // namespace longhaul::wire
