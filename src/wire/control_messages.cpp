#include "wire/control_messages.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "wire/codec.hpp"

namespace longhaul::wire {
namespace {

constexpr uint8_t kFirstType = static_cast<uint8_t>(ControlType::kRegister);
constexpr uint8_t kLastType = static_cast<uint8_t>(ControlType::kStateSourceLost);
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
  w.boolean(m.admit_joiners);
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
  w.u32(static_cast<uint32_t>(m.code));
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

void put(Writer& w, const StateReportMsg& m) {
  w.u64(m.epoch);
  w.u32(m.block_bytes);
  w.u64(m.revision);
  w.u8(static_cast<uint8_t>(m.strategy));
  w.u32(static_cast<uint32_t>(m.tensors.size()));
  for (const auto& t : m.tensors) {
    w.string(t.name);
    w.u8(t.dtype);
    w.u64(t.count);
    w.u32(static_cast<uint32_t>(t.block_hashes.size()));
    for (uint64_t h : t.block_hashes) w.u64(h);
    w.bytes(std::as_bytes(std::span(t.compressible)));
  }
}
void put(Writer& w, const StatePlanMsg& m) {
  w.u64(m.epoch);
  w.u32(static_cast<uint32_t>(m.code));
  w.string(m.reason);
  w.u64(m.revision);
  w.u32(static_cast<uint32_t>(m.sources.size()));
  for (const auto& s : m.sources) {
    w.u64(s.peer_id);
    w.string(s.host);
    w.u16(s.port);
  }
  w.u32(static_cast<uint32_t>(m.fetches.size()));
  for (const auto& f : m.fetches) {
    w.u32(f.tensor);
    w.u32(static_cast<uint32_t>(f.sources.size()));
    for (uint64_t id : f.sources) w.u64(id);
    w.u32(static_cast<uint32_t>(f.blocks.size()));
    for (const auto& b : f.blocks) {
      w.u32(b.index);
      w.u64(b.hash);
      w.boolean(b.compressible);
    }
  }
}
void put(Writer& w, const StateDoneMsg& m) {
  w.u64(m.epoch);
  w.u32(static_cast<uint32_t>(m.code));
  w.string(m.reason);
}
void put(Writer& w, const StateCompleteMsg& m) {
  w.u64(m.epoch);
}
void put(Writer& w, const StateFetchMsg& m) {
  w.u64(m.request);
  w.u32(m.tensor);
  w.u32(m.first_block);
  w.u32(m.block_count);
  w.boolean(m.compressed);
}
void put(Writer& w, const StateBlocksZMsg& m) {
  w.u64(m.request);
  w.u32(static_cast<uint32_t>(m.blocks.size()));
  for (const auto& b : m.blocks) {
    w.boolean(b.zstd);
    w.bytes(b.bytes);
  }
  w.u64(m.compress_ns);
}
void put(Writer& w, const StateFetchFailedMsg& m) {
  w.u64(m.request);
  w.u32(static_cast<uint32_t>(m.code));
  w.string(m.reason);
}

Status get_status(Reader& r, bool allow_ok, lh_status* out) {
  uint32_t code = 0;
  LH_RETURN_IF_ERROR(r.u32(&code));
  if ((code == LH_OK && !allow_ok) || code > LH_ERR_INTERNAL)
    return protocol_error(fmt::format("invalid status code {}", code));
  *out = static_cast<lh_status>(code);
  return Status::ok();
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
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  return r.boolean(&m->admit_joiners);
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
  LH_RETURN_IF_ERROR(get_status(r, false, &m->code));
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

// A status code on the wire: any lh_status, or only failures when `allow_ok` is false.
Status get(Reader& r, StateReportMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  LH_RETURN_IF_ERROR(r.u32(&m->block_bytes));
  LH_RETURN_IF_ERROR(r.u64(&m->revision));
  uint8_t strategy = 0;
  LH_RETURN_IF_ERROR(r.u8(&strategy));
  if (strategy > static_cast<uint8_t>(SyncStrategy::kSendOnly))
    return protocol_error(fmt::format("unknown sync strategy {}", strategy));
  m->strategy = static_cast<SyncStrategy>(strategy);
  uint32_t n = 0;
  LH_RETURN_IF_ERROR(r.count(&n, 4 + 1 + 1 + 8 + 4 + 4, kMaxTensors));
  m->tensors.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto& t = m->tensors[i];
    LH_RETURN_IF_ERROR(r.string(&t.name, kMaxTensorNameBytes));
    if (t.name.empty()) return protocol_error("empty tensor name");
    if (i > 0 && !(m->tensors[i - 1].name < t.name))
      return protocol_error(fmt::format("tensor '{}' out of order or listed twice", t.name));
    LH_RETURN_IF_ERROR(r.u8(&t.dtype));
    if (t.dtype > 9)
      return protocol_error(fmt::format("tensor '{}': unknown dtype {}", t.name, t.dtype));
    LH_RETURN_IF_ERROR(r.u64(&t.count));
    uint32_t blocks = 0;
    LH_RETURN_IF_ERROR(r.count(&blocks, 8));
    t.block_hashes.resize(blocks);
    for (auto& h : t.block_hashes) LH_RETURN_IF_ERROR(r.u64(&h));
    std::vector<std::byte> bitmap;
    LH_RETURN_IF_ERROR(r.bytes(&bitmap, (blocks + 7) / 8));
    if (bitmap.size() != (blocks + 7) / 8)
      return protocol_error(
          fmt::format("tensor '{}': compressibility bitmap of {} bytes for {} blocks", t.name,
                      bitmap.size(), blocks));
    t.compressible.resize(bitmap.size());
    for (size_t b = 0; b < bitmap.size(); ++b)
      t.compressible[b] = std::to_integer<uint8_t>(bitmap[b]);
  }
  return Status::ok();
}
Status get(Reader& r, StatePlanMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  LH_RETURN_IF_ERROR(get_status(r, true, &m->code));
  LH_RETURN_IF_ERROR(r.string(&m->reason, kMaxReasonBytes));
  LH_RETURN_IF_ERROR(r.u64(&m->revision));
  uint32_t n = 0;
  LH_RETURN_IF_ERROR(r.count(&n, 8 + 4 + 2, kMaxMembers));
  m->sources.resize(n);
  std::set<uint64_t> ids;
  for (auto& s : m->sources) {
    LH_RETURN_IF_ERROR(r.u64(&s.peer_id));
    LH_RETURN_IF_ERROR(r.string(&s.host, kMaxHostBytes));
    LH_RETURN_IF_ERROR(r.u16(&s.port));
    if (s.peer_id == 0 || s.port == 0) return protocol_error("source with peer id or port 0");
    if (!ids.insert(s.peer_id).second)
      return protocol_error(fmt::format("source {} listed twice", s.peer_id));
  }
  LH_RETURN_IF_ERROR(r.count(&n, 4 + 4 + 4, kMaxTensors));
  m->fetches.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto& f = m->fetches[i];
    LH_RETURN_IF_ERROR(r.u32(&f.tensor));
    if (i > 0 && f.tensor <= m->fetches[i - 1].tensor)
      return protocol_error(
          fmt::format("fetch of tensor {} out of order or listed twice", f.tensor));
    uint32_t k = 0;
    LH_RETURN_IF_ERROR(r.count(&k, 8, kMaxMembers));
    if (k == 0) return protocol_error(fmt::format("fetch of tensor {} without a source", f.tensor));
    f.sources.resize(k);
    for (auto& id : f.sources) {
      LH_RETURN_IF_ERROR(r.u64(&id));
      if (!ids.contains(id))
        return protocol_error(fmt::format("fetch names unlisted source {}", id));
    }
    LH_RETURN_IF_ERROR(r.count(&k, 4 + 8 + 1));
    if (k == 0) return protocol_error(fmt::format("fetch of tensor {} without blocks", f.tensor));
    f.blocks.resize(k);
    for (size_t b = 0; b < k; ++b) {
      LH_RETURN_IF_ERROR(r.u32(&f.blocks[b].index));
      LH_RETURN_IF_ERROR(r.u64(&f.blocks[b].hash));
      LH_RETURN_IF_ERROR(r.boolean(&f.blocks[b].compressible));
      if (b > 0 && f.blocks[b].index <= f.blocks[b - 1].index)
        return protocol_error(fmt::format("blocks of tensor {} out of order", f.tensor));
    }
  }
  if (m->code != LH_OK && !m->fetches.empty()) return protocol_error("a failed plan with fetches");
  return Status::ok();
}
Status get(Reader& r, StateDoneMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  LH_RETURN_IF_ERROR(get_status(r, true, &m->code));
  return r.string(&m->reason, kMaxReasonBytes);
}
Status get(Reader& r, StateCompleteMsg* m) {
  return r.u64(&m->epoch);
}
Status get(Reader& r, StateFetchMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->request));
  LH_RETURN_IF_ERROR(r.u32(&m->tensor));
  LH_RETURN_IF_ERROR(r.u32(&m->first_block));
  LH_RETURN_IF_ERROR(r.u32(&m->block_count));
  LH_RETURN_IF_ERROR(r.boolean(&m->compressed));
  if (m->block_count == 0) return protocol_error("fetch of 0 blocks");
  if (m->compressed && m->block_count > kMaxBlocksPerCompressedFetch)
    return protocol_error(fmt::format("compressed fetch of {} blocks (at most {})", m->block_count,
                                      kMaxBlocksPerCompressedFetch));
  if (uint64_t{m->first_block} + m->block_count > UINT32_MAX)
    return protocol_error("block range overflows");
  return Status::ok();
}
Status get(Reader& r, StateBlocksZMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->request));
  uint32_t n = 0;
  LH_RETURN_IF_ERROR(r.count(&n, 1 + 4, kMaxBlocksPerCompressedFetch));
  m->blocks.resize(n);
  for (auto& b : m->blocks) {
    LH_RETURN_IF_ERROR(r.boolean(&b.zstd));
    LH_RETURN_IF_ERROR(r.bytes(&b.bytes, kMaxStateBlockBytes));
  }
  return r.u64(&m->compress_ns);
}
Status get(Reader& r, StateFetchFailedMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->request));
  LH_RETURN_IF_ERROR(get_status(r, false, &m->code));
  return r.string(&m->reason, kMaxReasonBytes);
}
void put(Writer& w, const BatchReportMsg& m) {
  w.u64(m.epoch);
  w.u64(m.attempt);
  w.boolean(m.ok);
}
void put(Writer& w, const BatchDecisionMsg& m) {
  w.u64(m.epoch);
  w.u64(m.attempt);
  w.boolean(m.ok);
}
// Only admitted peers run batches (epoch 0 is "not admitted") and attempts count from 1.
Status get_batch_outcome(Reader& r, uint64_t* epoch, uint64_t* attempt, bool* ok) {
  LH_RETURN_IF_ERROR(r.u64(epoch));
  LH_RETURN_IF_ERROR(r.u64(attempt));
  LH_RETURN_IF_ERROR(r.boolean(ok));
  if (*epoch == 0) return protocol_error("batch outcome for epoch 0");
  if (*attempt == 0) return protocol_error("batch attempt 0 (attempts count from 1)");
  return Status::ok();
}
Status get(Reader& r, BatchReportMsg* m) {
  return get_batch_outcome(r, &m->epoch, &m->attempt, &m->ok);
}
Status get(Reader& r, BatchDecisionMsg* m) {
  return get_batch_outcome(r, &m->epoch, &m->attempt, &m->ok);
}
void put(Writer& w, const StateSourceLostMsg& m) {
  w.u64(m.epoch);
  w.u64(m.peer_id);
}
Status get(Reader& r, StateSourceLostMsg* m) {
  LH_RETURN_IF_ERROR(r.u64(&m->epoch));
  LH_RETURN_IF_ERROR(r.u64(&m->peer_id));
  // Only admitted peers sync state (epoch 0 is "not admitted"), and peer ids count from 1.
  if (m->epoch == 0) return protocol_error("STATE_SOURCE_LOST for epoch 0");
  if (m->peer_id == 0) return protocol_error("STATE_SOURCE_LOST for peer 0");
  return Status::ok();
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
