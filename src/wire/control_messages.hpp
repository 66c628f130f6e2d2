// The control-plane message schema: every message exchanged between a peer and the master, the
// two a peer sends its ring neighbours when it sets up a data link, and the shared-state messages
// (to the master, and between a fetcher and its sources on a state link).
//
// A control message is one CONTROL frame whose payload is a u8 type tag (ControlType) followed by
// the message's fields in the wire codec's encoding (codec.hpp). decode_control() validates
// strictly: a known tag, every field within its limit, cross-field consistency (a topology names
// each member once and places it in exactly one ring of its own group) and no trailing bytes. A
// message that fails decoding is a protocol error; the receiver drops the connection.
//
// See docs/protocol.md for who sends what, when.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/status.hpp"

namespace longhaul::wire {

enum class ControlType : uint8_t {
  kRegister = 1,           // peer -> master: join this peer group; I listen at host:port
  kWelcome = 2,            // master -> peer: your peer id and the heartbeat rules
  kHeartbeat = 3,          // both ways, every heartbeat interval
  kUpdateTopology = 4,     // peer -> master: I am at my update_topology boundary in `epoch`
  kTopologyUnchanged = 5,  // master -> peer: nothing to do; stay in `epoch`
  kTopology = 6,           // master -> peer: proposed next epoch: members and ring order per group
  kLinksReady = 7,         // peer -> master: my links for `epoch` are up (minus the unreachable)
  kEpochCommit = 8,        // master -> peer: everyone is ready; enter `epoch`
  kAbort = 9,              // master -> peer: abort every in-flight op of `group` in `epoch`
  kPendingChanged = 10,    // master -> peer: whether update_topology has work to do
  kReportPeerLost = 11,    // peer -> master: my data link to `peer_id` failed
  kLeave = 12,             // peer -> master: I leave (gracefully)
  kBye = 13,               // master -> peer: your leave is recorded
  kRemoved = 14,           // master -> peer: you are removed, with the reason; the link closes
  kPeerHello = 15,         // peer -> neighbour, on a data link: I am `peer_id`, for `epoch`
  kPeerHelloAck = 16,      // neighbour -> peer: accepted for `epoch`
  // Shared state (docs/state.md).
  kStateReport = 17,       // peer -> master: my revision, strategy and block hashes per tensor
  kStatePlan = 18,         // master -> peer: the outcome for me, and the blocks to fetch from whom
  kStateDone = 19,         // peer -> master: my fetching is over (with its status)
  kStateComplete = 20,     // master -> peer: every fetcher is done; stop serving
  kStateFetch = 21,        // fetcher -> source, on a state link: send me these blocks
  kStateBlocksZ = 22,      // source -> fetcher: the blocks of a compressed fetch
  kStateFetchFailed = 23,  // source -> fetcher: I cannot serve this fetch
  // Batch all-reduce outcome (docs/collectives.md, lh_allreduce_batch).
  kBatchReport = 24,    // peer -> master: my outcome of batch attempt `attempt` in `epoch`
  kBatchDecision = 25,  // master -> peer: the group's outcome of that attempt
  // Shared state, added in protocol version 3.
  kStateSourceLost = 26,  // master -> fetcher: a source of your plan was lost; stop using it
  // Nodes, added in protocol version 5 (docs/protocol.md, "Nodes").
  kNodeWaiting = 27,  // master -> peer: your node is admitted once all its rails have registered
  // Observability, added in protocol version 6 (docs/operations.md); the overlap's figures in 11.
  kPeerStats = 28,  // peer -> master: my traffic, my links as TCP measures them, my progress
  // Master restart, added in protocol version 7 (docs/protocol.md, "Master restart").
  kRejoin = 29,  // peer -> (restarted) master: I was member `peer_id`; here is my view of the run
  // Nodes of several rails, added in protocol version 9 (docs/protocol.md, "Node agreement").
  kNodeAgree = 30,   // rail -> master: my flags at my node's agreement point `point`
  kNodeAgreed = 31,  // master -> rail: every rail of the node reached `point`; their flags, OR-ed
  // Collective timeouts, added in protocol version 13 (docs/protocol.md, "Abort requests").
  kAbortRequest = 32,  // peer -> master: a collective of mine timed out in `epoch`; abort my group
};
const char* control_type_name(ControlType t);

inline constexpr uint32_t kMaxHostBytes = 255;
inline constexpr uint32_t kMaxReasonBytes = 1024;
inline constexpr uint32_t kMaxMembers = 1u << 16;
inline constexpr uint32_t kMaxTensorNameBytes = 1024;
inline constexpr uint32_t kMaxTensors = 1u << 20;
// A compressed fetch answers at most this many blocks in one STATE_BLOCKS_Z message.
inline constexpr uint32_t kMaxBlocksPerCompressedFetch = 4;
inline constexpr uint32_t kMaxStateBlockBytes = 16u << 20;
// A node's identity (lh_comm_options.node) and its rail count.
inline constexpr uint32_t kMaxNodeNameBytes = 255;
inline constexpr uint32_t kMaxRails = 1024;

struct RegisterMsg {
  uint32_t group = 0;
  std::string advertised_host;  // empty: the master uses the address it sees the peer connect from
  uint16_t advertised_port = 0;
  // The node (machine) this peer is one rank of (protocol version 5): every rail of a node is
  // admitted, moved and evicted together. Empty: a node of one rail (rail 0 of 1).
  std::string node;
  uint32_t rail = 0;   // this rank's rail, 0..rails-1
  uint32_t rails = 1;  // ranks of the node, one per rail
  // The peer links to every member of its group, not only its ring neighbours (protocol version
  // 8): the master accepts its reports of unreachable or lost links about any member of the group,
  // and only about its ring neighbours otherwise.
  bool full_mesh = false;
};
struct WelcomeMsg {
  uint64_t peer_id = 0;
  uint32_t heartbeat_interval_ms = 1000;
  uint32_t heartbeat_misses = 3;
};
struct HeartbeatMsg {};
struct UpdateTopologyMsg {
  uint64_t epoch = 0;
  // false: a batch all-reduce retries right after this call; the round must not admit waiting
  // peers (they would not run the retry). A round admits joiners only if every member asked.
  bool admit_joiners = true;
};
struct TopologyUnchangedMsg {
  uint64_t epoch = 0;
};
struct MemberInfo {
  uint64_t peer_id = 0;
  uint32_t group = 0;
  std::string host;
  uint16_t port = 0;
};
struct RingInfo {
  uint32_t group = 0;
  std::vector<uint64_t> order;  // peer ids in ring order
};
struct TopologyMsg {
  uint64_t epoch = 0;
  std::vector<MemberInfo> members;
  std::vector<RingInfo> rings;  // one per group, ascending group
  // 0: members and rings are the whole proposed epoch. Otherwise (protocol version 7) the
  // proposal is a change to the epoch `base_epoch`, which the receiver is in: `members` are the
  // peers new since then, `removed` the ids gone since then, and each ring lists only the ids
  // appended to that group's ring once the removed ones are taken out of it (a group with
  // nothing appended is left out). A round then costs the master bytes in the number of
  // changes per member, not in the number of members.
  uint64_t base_epoch = 0;
  std::vector<uint64_t> removed;  // ascending
};
struct LinksReadyMsg {
  uint64_t epoch = 0;
  std::vector<uint64_t> unreachable;  // neighbours this peer could not link to
};
struct EpochCommitMsg {
  uint64_t epoch = 0;
  uint64_t op_sequence = 0;  // the master's global operation sequence number at this epoch
  bool peers_pending = false;
};
struct AbortMsg {
  uint64_t epoch = 0;
  uint32_t group = 0;
  // LH_ERR_PEER_LOST when a member was lost or a link broke; LH_ERR_ABORTED when the group only
  // reconfigures (a member waits in update_topology to admit a joiner).
  lh_status code = LH_ERR_PEER_LOST;
  std::string reason;
};
struct PendingChangedMsg {
  bool pending = false;
};
struct ReportPeerLostMsg {
  uint64_t epoch = 0;
  uint64_t peer_id = 0;
  std::string reason;
};
struct AbortRequestMsg {
  uint64_t epoch = 0;
  std::string reason;
};
struct LeaveMsg {
  std::string reason;
};
struct ByeMsg {};
struct RemovedMsg {
  lh_status code = LH_ERR_ABORTED;
  std::string reason;
};
struct PeerHelloMsg {
  uint64_t epoch = 0;
  uint64_t peer_id = 0;
};
struct PeerHelloAckMsg {
  uint64_t epoch = 0;
  uint64_t peer_id = 0;
};

// Shared state. Tensors are listed and numbered in ascending name order.
enum class SyncStrategy : uint8_t { kEnforcePopular = 0, kReceiveOnly = 1, kSendOnly = 2 };
struct TensorReport {
  std::string name;
  uint8_t dtype = 0;  // quant::DType
  uint64_t count = 0;
  std::vector<uint64_t> block_hashes;
  std::vector<uint8_t> compressible;  // one bit per block, LSB first; ceil(blocks / 8) bytes
};
struct StateReportMsg {
  uint64_t epoch = 0;
  uint32_t block_bytes = 0;  // the sender's protocol block size; must equal the master's
  uint64_t revision = 0;
  SyncStrategy strategy = SyncStrategy::kEnforcePopular;
  std::vector<TensorReport> tensors;
};
struct StateSource {
  uint64_t peer_id = 0;
  std::string host;
  uint16_t port = 0;
};
struct BlockToFetch {
  uint32_t index = 0;
  uint64_t hash = 0;  // the elected content's block hash, to verify on arrival
  bool compressible = false;
};
struct TensorFetch {
  uint32_t tensor = 0;            // index into the fetcher's tensors (ascending names)
  std::vector<uint64_t> sources;  // peer ids (listed in StatePlanMsg::sources) holding the content
  std::vector<BlockToFetch> blocks;  // ascending block index
};
struct StatePlanMsg {
  uint64_t epoch = 0;
  lh_status code = LH_OK;  // not OK: this peer takes no further part (the reason says why)
  std::string reason;
  uint64_t revision = 0;  // the revision this peer holds once its sync succeeds
  std::vector<StateSource> sources;
  std::vector<TensorFetch> fetches;  // ascending tensor
};
struct StateDoneMsg {
  uint64_t epoch = 0;
  lh_status code = LH_OK;
  std::string reason;
};
struct StateCompleteMsg {
  uint64_t epoch = 0;
};
struct StateFetchMsg {
  uint64_t request = 0;  // the DATA op id of a raw answer; echoed by the other answers
  uint32_t tensor = 0;
  uint32_t first_block = 0;
  uint32_t block_count = 0;
  bool compressed = false;  // answer with STATE_BLOCKS_Z (at most kMaxBlocksPerCompressedFetch)
};
struct CompressedBlock {
  bool zstd = false;  // false: the block's raw bytes
  std::vector<std::byte> bytes;
};
struct StateBlocksZMsg {
  uint64_t request = 0;
  std::vector<CompressedBlock> blocks;
  // The source's time compressing these blocks on one thread (protocol version 4): the fetcher
  // compares that rate with the link's to decide whether compressing pays (docs/state.md).
  uint64_t compress_ns = 0;
};
struct StateFetchFailedMsg {
  uint64_t request = 0;
  lh_status code = LH_ERR_ABORTED;
  std::string reason;
};
// The master lost `peer_id` (its control link failed or it missed its heartbeats) while it is a
// source in the receiver's plan: a frozen source's sockets stay open, so only the master knows.
struct StateSourceLostMsg {
  uint64_t epoch = 0;
  uint64_t peer_id = 0;
};

// The registering peer's node is incomplete: it is admitted once every rail has registered.
// Sent to each registered rail whenever the set changes, so a rank waiting in connect can say
// which rails its node still lacks.
struct NodeWaitingMsg {
  uint32_t rails = 1;
  std::vector<uint32_t> registered;  // ascending rail indices
};

// Batch all-reduce: attempts are numbered 1, 2, ... per epoch on every member (all members of an
// epoch run the same attempts), so (epoch, attempt) names one attempt of the whole group.
struct BatchReportMsg {
  uint64_t epoch = 0;
  uint64_t attempt = 0;
  bool ok = false;  // every all-reduce of the attempt succeeded here
  // The attempt ran past this member's own deadline (an engine round's; protocol version 12): the
  // master counts the members the others waited for (batch_arbiter.hpp).
  bool late = false;
};
struct BatchDecisionMsg {
  uint64_t epoch = 0;
  uint64_t attempt = 0;
  bool ok = false;  // every member reported OK: keep the outputs; false: restore and retry
};

// PEER_STATS: what a peer measures, for the master's status page and metrics (docs/operations.md).
// Every counter is cumulative since the communicator was created; the master turns them into rates.
inline constexpr uint32_t kMaxStatsLinks = 256;  // a peer reports at most this many data links
struct LinkStatsEntry {
  uint64_t peer_id = 0;  // the member at the far end of the data link
  uint32_t connections = 0;
  uint64_t rtt_us = 0;         // smallest smoothed RTT of its connections (TCP_INFO)
  uint64_t delivery_rate = 0;  // bytes/s, the kernel's estimate, summed over the connections
  uint64_t bytes_sent = 0;     // payload bytes the far end acknowledged
  uint64_t bytes_received = 0;
  uint64_t retransmits = 0;
};
struct PeerStatsMsg {
  uint64_t epoch = 0;  // the peer's committed epoch
  uint64_t data_sent = 0, data_received = 0;
  uint64_t control_sent = 0, control_received = 0;
  uint64_t state_sent = 0, state_received = 0;
  // Shared state: the revision and digest (XXH3 over every tensor's block hashes) after the last
  // state sync that succeeded here; has_state false before the first.
  bool has_state = false;
  uint64_t state_revision = 0;
  uint64_t state_digest = 0;
  // Sync engine (src/sync): has_engine false when none runs on this peer.
  bool has_engine = false;
  uint64_t inner_steps = 0;
  uint64_t outer_rounds = 0;  // rounds applied
  uint64_t rounds_dropped = 0;
  uint64_t last_round_participants = 0;
  uint64_t last_round_bytes = 0;  // data bytes this peer moved for its last round
  uint64_t blocked_ns = 0;        // time the trainer waited inside the engine
  // The overlap (protocol version 11, docs/overlap.md): τ now (the group's), the steps the last
  // cycle needed (τ's source when adaptive), how often τ changed, and this peer's sync time (its
  // last applied round, launch to result) and step time (the trainer's compute per step).
  uint32_t delay = 0;
  uint32_t delay_needed = 0;
  uint64_t delay_changes = 0;
  uint64_t sync_time_ns = 0;
  uint64_t step_time_ns = 0;
  std::vector<LinkStatsEntry> links;  // at most kMaxStatsLinks, ascending peer ids
};

// REJOIN: a member whose control link to the master broke reconnects and reports its view of the
// run, so that a restarted master rebuilds membership, nodes, epochs and rings from its members
// (and resolves the batch decisions it lost). The master answers WELCOME with the same id, or
// REMOVED when the report conflicts with its group's (docs/protocol.md, "Master restart").
struct RejoinMsg {
  uint64_t peer_id = 0;
  // As at REGISTER: the group, the data address and the node.
  uint32_t group = 0;
  std::string advertised_host;
  uint16_t advertised_port = 0;
  std::string node;
  uint32_t rail = 0;
  uint32_t rails = 1;
  bool full_mesh = false;       // as at REGISTER (protocol version 8)
  uint64_t epoch = 0;           // the committed epoch this peer is in (at least 1)
  uint32_t world = 0;           // the members of that epoch, every group (at least 1)
  std::vector<uint64_t> ring;   // its group's ring in that epoch (it is in it)
  uint64_t proposed_epoch = 0;  // the proposal it was linking for, 0 if none
  std::vector<uint64_t> proposed_ring;
  uint64_t decided_attempt = 0;  // its last batch attempt decided in `epoch`, 0 if none
  bool decided_ok = false;       // that decision
  // A rail of a node of several rails: the last node agreement point it has the answer to (0 if
  // none), and that answer. A restarted master gives it to a sibling whose answer the previous
  // master never delivered (protocol version 10).
  uint64_t node_answered = 0;
  uint32_t node_answer = 0;
};

// Node agreement: the rails of a node of several rails reach the same agreement points in the
// same order (1, 2, ... per rail), each with its kind and flags; the master answers each rail
// once every rail of the node has reached that point, with the OR of all their flags. The master
// gives kinds and flags no meaning beyond comparing the kinds (rails at the same point with
// different kinds have diverged): they are the rails' (sync/engine.hpp re-forms with them).
struct NodeAgreeMsg {
  uint64_t point = 0;
  uint32_t kind = 0;
  uint32_t flags = 0;
};
struct NodeAgreedMsg {
  uint64_t point = 0;
  uint32_t flags = 0;  // the OR of every rail's flags at `point`
};

// Alternative i holds the message whose ControlType value is i + 1.
using ControlMessage =
    std::variant<RegisterMsg, WelcomeMsg, HeartbeatMsg, UpdateTopologyMsg, TopologyUnchangedMsg,
                 TopologyMsg, LinksReadyMsg, EpochCommitMsg, AbortMsg, PendingChangedMsg,
                 ReportPeerLostMsg, LeaveMsg, ByeMsg, RemovedMsg, PeerHelloMsg, PeerHelloAckMsg,
                 StateReportMsg, StatePlanMsg, StateDoneMsg, StateCompleteMsg, StateFetchMsg,
                 StateBlocksZMsg, StateFetchFailedMsg, BatchReportMsg, BatchDecisionMsg,
                 StateSourceLostMsg, NodeWaitingMsg, PeerStatsMsg, RejoinMsg, NodeAgreeMsg,
                 NodeAgreedMsg, AbortRequestMsg>;

ControlType control_type(const ControlMessage& m);
std::vector<std::byte> encode_control(const ControlMessage& m);
// Never crashes and never allocates beyond the input's size on hostile input; any violation is
// an LH_ERR_PROTOCOL Status naming the message and the field.
Result<ControlMessage> decode_control(std::span<const std::byte> bytes);

}  // namespace longhaul::wire
