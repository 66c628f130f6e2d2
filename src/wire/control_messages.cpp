#include "wire/control_messages.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "wire/codec.hpp"

namespace longhaul::wire {
namespace {

constexpr uint8_t kFirstType = static_cast<uint8_t>(ControlType::kRegister);
constexpr uint8_t kLastType = static_cast<uint8_t>(ControlType::kPeerHelloAck);
static_assert(std::variant_size_v<ControlMessage> == kLastType - kFirstType + 1);

void put(Writer& w, const RegisterMsg& m) {
  w.u32(m.group);
  w.string(m.advertised_host);
  w.u16(m.advertised_port);
}
void put(Writer& w, const WelcomeMsg& m) {
  w.u64(m.peer_id);
  w.u32(m.heartbeat_interval_ms);
  w.u32(m.heartbeat_misses);
}
void put(Writer&, const HeartbeatMsg&) {}
void put(Writer& w, const UpdateTopologyMsg& m) {
  w.u64(m.epoch);
}
void put(Writer& w, const TopologyUnchangedMsg& m) {
  w.u64(m.epoch);
}
void put(Writer& w, const TopologyMsg& m) {
  w.u64(m.epoch);
  w.u32(static_cast<uint32_t>(m.members.size()));
  for (const auto& member : m.members) {
    w.u64(member.peer_id);
    w.u32(member.group);
    w.string(member.host);
    w.u16(member.port);
  }
  w.u32(static_cast<uint32_t>(m.rings.size()));
  for (const auto& ring : m.rings) {
    w.u32(ring.group);
    w.u32(static_cast<uint32_t>(ring.order.size()));
    for (uint64_t id : ring.order) w.u64(id);
  }
}
void put(Writer& w, const LinksReadyMsg& m) {
  w.u64(m.epoch);
  w.u32(static_cast<uint32_t>(m.unreachable.size()));
  for (uint64_t id : m.unreachable) w.u64(id);
}
void put(Writer& w, const EpochCommitMsg& m) {
  w.u64(m.epoch);
  w.u64(m.op_sequence);
  w.boolean(m.peers_pending);
}
void put(Writer& w, const AbortMsg& m) {
  w.u64(m.epoch);
  w.u32(m.group);
  w.string(m.reason);
}
void put(Writer& w, const PendingChangedMsg& m) {
  w.boolean(m.pending);
}
void put(Writer& w, const ReportPeerLostMsg& m) {
  w.u64(m.epoch);
  w.u64(m.peer_id);
  w.string(m.reason);
}
void put(Writer& w, const LeaveMsg& m) {
  w.string(m.reason);
}
void put(Writer&, const ByeMsg&) {}
void put(Writer& w, const RemovedMsg& m) {
  w.u32(static_cast<uint32_t>(m.code));
  w.string(m.reason);
}
void put(Writer& w, const PeerHelloMsg& m) {
  w.u64(m.epoch);
  w.u64(m.peer_id);
}
void put(Writer& w, const PeerHelloAckMsg& m) {
  w.u64(m.epoch);
  w.u64(m.peer_id);
}

Status get(Reader& r, RegisterMsg* m) {
  LH_RETURN_IF_ERROR(r.u32(&m->group));
  LH_RETURN_IF_ERROR(r.string(&m->advertised_host, kMaxHostBytes));
  return r.u16(&m->advertised_port);
}
Status get(Reader& r, WelcomeMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->peer_id));
  LH_RETURN_IF_ERROR(r.u32(&m->heartbeat_interval_ms));
  LH_RETURN_IF_ERROR(r.u32(&m->heartbeat_misses));
  if (m->peer_id == 0) return protocol_error("peer id 0 is reserved");
  if (m->heartbeat_interval_ms == 0 || m->heartbeat_misses == 0)
    return protocol_error("heartbeat interval and misses must be positive");
  return Status::ok();
}
Status get(Reader&, HeartbeatMsg*) {
  return Status::ok();
}
Status get(Reader& r, UpdateTopologyMsg* m) {
  return r.u64(&m->epoch);
}
Status get(Reader& r, TopologyUnchangedMsg* m) {
  return r.u64(&m->epoch);
}
Status get(Reader& r, TopologyMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  uint32_t n = 0;
  LH_RETURN_IF_ERROR(r.count(&n, 8 + 4 + 4 + 2, kMaxMembers));
  m->members.resize(n);
  std::set<uint64_t> ids;
  for (auto& member : m->members) {
    LH_RETURN_IF_ERROR(r.u64(&member.peer_id));
    LH_RETURN_IF_ERROR(r.u32(&member.group));
    LH_RETURN_IF_ERROR(r.string(&member.host, kMaxHostBytes));
    LH_RETURN_IF_ERROR(r.u16(&member.port));
    if (member.peer_id == 0) return protocol_error("member with peer id 0");
    if (!ids.insert(member.peer_id).second)
      return protocol_error(fmt::format("peer {} listed twice", member.peer_id));
  }
  uint32_t rings = 0;
  LH_RETURN_IF_ERROR(r.count(&rings, 4 + 4, kMaxMembers));
  m->rings.resize(rings);
  std::set<uint64_t> placed;
  std::set<uint32_t> groups;
  for (auto& ring : m->rings) {
    LH_RETURN_IF_ERROR(r.u32(&ring.group));
    if (!groups.insert(ring.group).second)
      return protocol_error(fmt::format("two rings for group {}", ring.group));
    uint32_t len = 0;
    LH_RETURN_IF_ERROR(r.count(&len, 8, kMaxMembers));
    if (len == 0) return protocol_error(fmt::format("empty ring for group {}", ring.group));
    ring.order.resize(len);
    for (auto& id : ring.order) {
      LH_RETURN_IF_ERROR(r.u64(&id));
      auto it = std::find_if(m->members.begin(), m->members.end(),
                             [id](const MemberInfo& x) { return x.peer_id == id; });
      if (it == m->members.end())
        return protocol_error(fmt::format("ring names unknown peer {}", id));
      if (it->group != ring.group)
        return protocol_error(fmt::format("peer {} of group {} placed in the ring of group {}", id,
                                          it->group, ring.group));
      if (!placed.insert(id).second) return protocol_error(fmt::format("peer {} placed twice", id));
    }
  }
  if (placed.size() != m->members.size())
    return protocol_error("a member is missing from its group's ring");
  return Status::ok();
}
Status get(Reader& r, LinksReadyMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  uint32_t n = 0;
  LH_RETURN_IF_ERROR(r.count(&n, 8, kMaxMembers));
  m->unreachable.resize(n);
  for (auto& id : m->unreachable) LH_RETURN_IF_ERROR(r.u64(&id));
  return Status::ok();
}
Status get(Reader& r, EpochCommitMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  LH_RETURN_IF_ERROR(r.u64(&m->op_sequence));
  return r.boolean(&m->peers_pending);
}
Status get(Reader& r, AbortMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  LH_RETURN_IF_ERROR(r.u32(&m->group));
  return r.string(&m->reason, kMaxReasonBytes);
}
Status get(Reader& r, PendingChangedMsg* m) {
  return r.boolean(&m->pending);
}
Status get(Reader& r, ReportPeerLostMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  LH_RETURN_IF_ERROR(r.u64(&m->peer_id));
  return r.string(&m->reason, kMaxReasonBytes);
}
Status get(Reader& r, LeaveMsg* m) {
  return r.string(&m->reason, kMaxReasonBytes);
}
Status get(Reader&, ByeMsg*) {
  return Status::ok();
}
Status get(Reader& r, RemovedMsg* m) {
  uint32_t code = 0;
  LH_RETURN_IF_ERROR(r.u32(&code));
  if (code == LH_OK || code > LH_ERR_INTERNAL)
    return protocol_error(fmt::format("invalid status code {}", code));
  m->code = static_cast<lh_status>(code);
  return r.string(&m->reason, kMaxReasonBytes);
}
Status get(Reader& r, PeerHelloMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  return r.u64(&m->peer_id);
}
Status get(Reader& r, PeerHelloAckMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  return r.u64(&m->peer_id);
}

template <size_t I>
Status decode_alternative(Reader& r, size_t index, ControlMessage* out) {
  if constexpr (I < std::variant_size_v<ControlMessage>) {
    if (index == I) {
      std::variant_alternative_t<I, ControlMessage> m;
      LH_RETURN_IF_ERROR(get(r, &m));
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
  }
  return "UNKNOWN";
}

ControlType control_type(const ControlMessage& m) {
  return static_cast<ControlType>(m.index() + kFirstType);
}

std::vector<std::byte> encode_control(const ControlMessage& m) {
  Writer w;
  w.u8(static_cast<uint8_t>(control_type(m)));
  std::visit([&w](const auto& msg) { put(w, msg); }, m);
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
