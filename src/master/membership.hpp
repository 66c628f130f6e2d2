// The master's membership state machine: who is in, who waits, the epoch, the ring of every
// peer group, and the reconfiguration rounds that move everyone from one epoch to the next.
//
// It is pure logic: events come in as calls, effects go out through an Outbox. It owns no socket,
// reads no clock and takes no lock; the server (server.hpp) calls it only from the master's one
// strand, which makes every decision deterministic and its unit tests plain function calls.
//
// Life of a peer: add_pending() (registered, waiting to be admitted) -> a round includes it ->
// commit (active in the new epoch) -> drop_peer() (left, lost, evicted).
//
// A round starts when a reconfiguration is needed (a peer waits to join, or the ring lost a
// member or a link since the last commit) and every active member waits in update_topology (with
// no active member, at once). The master proposes a new epoch (TOPOLOGY) to every participant,
// each sets up links to its ring neighbours and answers LINKS_READY; when all have answered and
// none reported an unreachable neighbour, the master commits (EPOCH_COMMIT) and everyone enters the
// epoch together. A reported unreachable pair is kept apart in a fresh proposal; if no ring keeps
// it apart, or the pair was already apart (peers with full_mesh link to non-neighbours as well),
// a peer of an unreachable pair is evicted with that reason (one not yet admitted
// first, then the one with the most unreachable neighbours, then the newest). A
// participant lost mid-round restarts the round without it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "master/nodes.hpp"
#include "master/ring_order.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::master {

// Where the state machine's effects go. Calls happen synchronously from inside Membership's
// methods and must not call back into Membership.
class Outbox {
 public:
  virtual ~Outbox() = default;
  virtual void send(PeerId to, const wire::ControlMessage& message) = 0;
  // The same message to each of `to`: by default one send() each; the server encodes it once.
  virtual void send_all(const std::vector<PeerId>& to, const wire::ControlMessage& message) {
    for (PeerId id : to) send(id, message);
  }
  // Tells the peer why it is removed (REMOVED) and closes its connection. Membership has already
  // forgotten it.
  virtual void disconnect(PeerId who, const Status& why) = 0;
  // A round proposing `epoch` has started; Membership expects on_round_timeout(epoch) if it is
  // still running after the configured topology timeout.
  virtual void round_started(uint64_t epoch) = 0;
  // `who` is about to be evicted for misbehaving (a missed round deadline, loss claims nobody
  // confirms): the caller remembers it against the member's identity (penalties.hpp), and against
  // its source address when the offence is one a party repeats under fresh identities: `lied`
  // (claims nobody confirmed), or a member still pending (a failed admission). The member is
  // still in Membership during the call.
  virtual void misbehaved(PeerId /*who*/, const std::string& /*what*/, bool /*lied*/ = false) {}
  // The round proposing `epoch` has answers from at least half its participants: the rest get a
  // grace period (MasterOptions::topology_grace) rather than the whole topology timeout.
  virtual void round_half_ready(uint64_t /*epoch*/) {}
  // The peer is no longer a member (left, lost or evicted); other state keyed by it can go.
  virtual void peer_forgotten(PeerId /*who*/) {}
  // The same moment, with what the status page shows: the peer's group, the reason Membership
  // logs, and whether it left gracefully.
  virtual void peer_left(PeerId /*who*/, uint32_t /*group*/, const std::string& /*reason*/,
                         bool /*graceful*/) {}
  // A member of `group` waits in update_topology while others of the group do not: the group's
  // operations of this epoch cannot complete any more (its collectives were aborted); a state sync
  // still collecting reports must end too.
  virtual void group_reconfiguring(uint32_t /*group*/) {}
  // Not every member of `group` will complete the operations of the committed epoch: a member was
  // lost or left, a link broke, or a member waits in update_topology. A batch attempt of the
  // group in this epoch that is not decided yet can only fail (batch_arbiter.hpp).
  virtual void group_epoch_failed(uint32_t /*group*/) {}
};

class Membership {
 public:
  enum class State { kPending, kActive };
  struct Member {
    PeerId id = 0;
    uint32_t group = 0;
    std::string host;
    uint16_t port = 0;
    State state = State::kPending;
    bool waiting = false;       // active and blocked in update_topology
    bool pending_sent = false;  // the last peers-pending flag this peer was told
    bool admit_joiners = true;  // what its waiting update_topology asked (UpdateTopologyMsg)
    bool full_mesh = false;     // links to every member of its group (wire::RegisterMsg)
    // The last epoch it reported a lost link in: one report per epoch aborts its group.
    uint64_t loss_reported_in = 0;
    uint64_t abort_requested_in = 0;  // the epoch of its last ABORT_REQUEST that aborted the group
    // Its claims of unreachable or lost links that the accused did not confirm, as (epoch,
    // accused), the last kClaimWindowEpochs epochs.
    std::vector<std::pair<uint64_t, PeerId>> unconfirmed;
    // The epoch it is in: the committed one, except for a member that rejoined a restarted
    // master and has not entered a new epoch yet (it reported its own).
    uint64_t epoch = 0;
    // It completed its own links: it was in a committed epoch with a neighbour, or rejoined
    // reporting a ring of two or more. Until then its claims about a newcomer the master reached
    // do not count (judge_round_claims).
    bool linked = false;
    // The master opened a TCP connection to its advertised data address (MasterServer's probe at
    // REGISTER); nullopt until the probe ends.
    std::optional<bool> reached_by_master;
  };
  // What a member of the previous master reports when it rejoins (wire::RejoinMsg).
  struct RejoinReport {
    PeerId id = 0;
    uint32_t group = 0;
    std::string host;
    uint16_t port = 0;
    NodeClaim node;
    uint64_t epoch = 0;
    uint32_t world = 0;  // members of that epoch, every group
    std::vector<PeerId> ring;
    uint64_t proposed_epoch = 0;  // 0: it was not linking for a proposal
    std::vector<PeerId> proposed_ring;
    bool full_mesh = false;
  };
  // A member whose claims about kMaxUnconfirmedClaims distinct peers within kClaimWindowEpochs
  // epochs were confirmed by none of them is removed as the party in conflict with everyone
  // else. An honest peer's claim goes unconfirmed only when its link fails one way (a black hole
  // the other end never noticed before the ring moved on), which the window makes rare.
  static constexpr size_t kMaxUnconfirmedClaims = 3;
  static constexpr uint64_t kClaimWindowEpochs = 16;

  explicit Membership(Outbox& outbox) : out_(outbox) {}

  // A fresh peer id (ids are never reused; ascending ids are join order).
  PeerId allocate_id() { return ++last_id_; }
  // Why a registration claiming `node` must be refused (membership_nodes.cpp), or OK.
  // Why this claim cannot join (LH_ERR_INVALID_ARGUMENT with the reason), or OK: the node
  // table's checks (NodeTable::check), and the shape of its group. A group holds one kind of
  // member: rail r of nodes of R rails, or peers of no node (a node of one rail). The rails of a
  // node re-form together, for their groups' reasons combined (docs/protocol.md, "Node
  // agreement"); a member of another shape re-forms for its own group's reasons alone, at other
  // steps, and its group would fall out of step for good.
  Status check_node_claim(const NodeClaim& node) const;
  // The registered peer `id` waits to be admitted. A rail of a node (node.name set, check passed)
  // waits until every rail of its node has registered: the node is admitted whole.
  // `full_mesh`: the peer links to every member of its group (wire::RegisterMsg).
  void add_pending(PeerId id, uint32_t group, std::string host, uint16_t port,
                   const NodeClaim& node = {}, bool full_mesh = false);
  // The master's probe of a pending peer's advertised data address ended: reached or not. A
  // claim that a reached newcomer is unreachable counts only from a member that completed its own
  // links (Member::linked); one that did not is the one in conflict (issue 50, item 2).
  void note_reached(PeerId id, bool reached);

  // Messages from a registered peer. A non-OK result means the peer broke the protocol; the
  // caller drops it (drop_peer) and closes its connection. Nothing was changed in that case.
  // `admit_joiners` false: a batch all-reduce retries right after this call, so the round admits
  // no waiting peer (it would not run the retry). Joiners then stay pending, and the
  // peers-pending flag stays down for the new epoch until release_held_joiners(): the members'
  // next step must be the retry, not another update_topology that would abort it.
  Status on_update_topology(PeerId id, uint64_t epoch, bool admit_joiners = true);
  // The retry that held joiners back has been decided: raise the peers-pending flag again so the
  // members admit them at their next update_topology.
  void release_held_joiners();
  // A batch attempt of the committed epoch failed (BatchArbiter): every member that hears so calls
  // update_topology next, and each of them must get the same answer. The master may learn why the
  // attempt failed only after the first of them asks (a killed peer's link can fail at the master
  // after a neighbour's abort has failed everyone's attempt): answering that one "unchanged" and a
  // later one with a new epoch would start them in the new epoch from different rounds, one round
  // apart for good. So the epoch is over: its members re-form, whatever the master knows.
  void on_batch_failed();
  // Claims of unreachable (LINKS_READY) or lost (REPORT_PEER_LOST) links (membership_claims.cpp)
  // are accepted only about the claimer's ring neighbours, or any member of its group when it
  // links as a full mesh; a claim about anyone else is a protocol violation. A claimed pair is
  // kept apart, but a claim decides no eviction alone: when no ring keeps the claimed pairs
  // apart, a member whose claims the accused did not confirm goes first, and one with unconfirmed
  // claims about kMaxUnconfirmedClaims peers is removed (LH_ERR_PEER_LOST, Outbox::misbehaved).
  Status on_links_ready(PeerId id, uint64_t epoch, const std::vector<PeerId>& unreachable);
  Status on_peer_lost(PeerId reporter, uint64_t epoch, PeerId lost, const std::string& reason);
  // A collective of member `id` timed out in `epoch` (ABORT_REQUEST): the others would wait for
  // its part for ever, so its group's collectives of the committed epoch are aborted
  // (LH_ERR_ABORTED, naming it) and the group re-forms at its next update_topology. Once per member
  // and epoch; ignored for an epoch a newer one replaced or while a re-formation runs.
  Status on_abort_request(PeerId id, uint64_t epoch, const std::string& reason);
  // The round proposing `epoch` ran out of time: participants that did not answer are evicted.
  void on_round_timeout(uint64_t epoch);
  // The peer is gone: left, connection lost, heartbeats missed, or evicted by the caller. Survivors
  // of its group get an ABORT if it was active and did not leave gracefully (a graceful leaver
  // has finished its collectives: the survivors' last ones still complete from the bytes it sent,
  // and anything that truly misses it fails when its links close); a round it took part in
  // restarts without it. Unknown ids are ignored.
  void drop_peer(PeerId id, const std::string& reason, bool graceful = false);
  // Evicts a member that misbehaved (the arbiters' missed deadlines): Outbox::misbehaved, then
  // REMOVED with `why`, as drop_peer otherwise. Unknown ids are ignored.
  void expel(PeerId id, const Status& why);

  // Recovery after a master restart (membership_recovery.cpp). While recovering no round starts:
  // members of the previous master rejoin (add_rejoined) and newcomers register as usual. When
  // every peer a rejoined member's ring names is back, every node of a rejoined rail is whole,
  // and as many members as the newest reported epoch had are back (or the caller's window ends),
  // finish_recovery() decides the run: per group, the view most members report (epoch and ring;
  // the proposal they were linking counts too, for a master lost between its commits) is the
  // group's; a member whose view matches neither is removed (LH_ERR_STATE_MISMATCH: rejoin as a
  // new peer to resync), as are the rails of a node that did not come back whole. The others are
  // active, the ring is re-formed at once, and the next epoch is newer than any reported.
  void begin_recovery() { recovering_ = true; }
  bool recovering() const { return recovering_; }
  // Non-OK: this rejoin is refused (not recovering, the id is taken by a peer of this master, or
  // the node claim conflicts); nothing changed and the caller removes the peer with the reason.
  Status add_rejoined(const RejoinReport& report);
  bool everyone_rejoined() const;
  void finish_recovery();
  // The floors a journal (journal.hpp) gives: ids and epochs handed out continue above them.
  void raise_floors(PeerId last_id, uint64_t last_epoch);
  PeerId last_id() const { return last_id_; }
  uint64_t last_epoch() const { return last_epoch_; }

  uint64_t epoch() const { return committed_epoch_; }
  uint64_t op_sequence() const { return op_sequence_; }
  // Whether update_topology has work to do (a peer waits to join or the ring must be re-formed).
  bool reconfiguration_needed() const;
  // The flag peers are told: reconfiguration_needed(), except joiners held back for a batch retry.
  bool pending_flag() const;
  bool round_in_progress() const { return round_.has_value(); }
  // Members wait in update_topology for a round that cannot start until the other active members
  // come too; those are the stragglers (the server's gather deadline evicts them).
  bool gathering() const;
  std::vector<PeerId> stragglers() const;
  const std::map<PeerId, Member>& members() const { return members_; }
  size_t active_count() const { return active_total_; }
  // Active members of `group`, and how many of them wait in update_topology.
  size_t group_active(uint32_t group) const;
  size_t group_waiting(uint32_t group) const;
  // Committed ring order per group.
  const std::map<uint32_t, std::vector<PeerId>>& rings() const { return rings_; }
  const std::set<PeerPair>& unreachable_pairs() const { return banned_; }
  const NodeTable& nodes() const { return nodes_; }

 private:
  struct Round {
    uint64_t epoch = 0;
    std::set<PeerId> participants;
    std::set<PeerId> ready;
    std::map<uint32_t, std::vector<PeerId>> rings;
    bool new_unreachable = false;
    bool admits_joiners = true;
    bool half_ready = false;  // Outbox::round_half_ready was called
    // What each participant's LINKS_READY named unreachable.
    std::map<PeerId, std::set<PeerId>> unreachable;
  };
  // One member's claim that its link to another is unreachable or lost.
  struct Claim {
    PeerId claimer = 0, accused = 0;
  };

  // A peer to evict because its group has no usable ring, and why.
  struct Eviction {
    PeerId id = 0;
    std::string reason;
  };
  using Groups = std::map<uint32_t, std::vector<PeerId>>;

  void maybe_start_round();
  void start_round();
  // A ring for every group into *rings, or the peer whose unreachable pairs leave a group none.
  std::optional<Eviction> solve_rings(const Groups& groups, Groups* rings) const;
  // The peer of `ids` (group `group`) that goes first when `blocking` pairs leave it no ring
  // (ring_found: a ring exists but the group's full mesh misses a pair).
  std::optional<Eviction> choose_eviction(uint32_t group, const std::vector<PeerId>& ids,
                                          const std::set<PeerPair>& blocking,
                                          bool ring_found) const;
  // Proposes a new epoch with these rings to the members taking part.
  void propose(Groups rings, bool admit);
  void commit();
  // Forgets the peer; aborts its group if it was active. Does not start rounds.
  void forget(PeerId id, const std::string& reason, bool graceful = false);
  void evict(PeerId id, const Status& why);
  void abort_group(uint32_t group, lh_status code, const std::string& reason);
  void sync_pending_flags();
  // Every change of a member's waiting flag goes through here, to keep the counts below.
  void set_waiting(Member& m, bool waiting);
  // The member becomes active (+1) or is forgotten while active (-1).
  void count_active(const Member& m, int change);
  // Whether pending peer `id` may join a round (its node, if any, is complete).
  bool admissible(PeerId id) const { return nodes_.admissible(id); }
  // Nodes (membership_nodes.cpp). A rail registered: tell an incomplete node's rails what is
  // missing, or log that the node is complete.
  void note_rail_registered(const Node& node);
  // A member of `group`, which shows the group's shape (check_node_claim), or 0 if it has none.
  PeerId member_of_group(uint32_t group) const;
  // `id` is being forgotten: its node goes with it. After an abrupt loss every other rail is
  // evicted with LH_ERR_NODE_EVICTED; after a graceful leave the node is departing, and its rails
  // that cannot leave on their own any more (not admitted, or waiting in update_topology) go now.
  void follow_node(PeerId id, const std::string& reason, bool graceful);
  // A rail of a departing node asked to go on (update_topology): it is removed instead.
  bool leave_departing_node(PeerId id);
  // Removes a rail of a departing node that runs no collective (graceful: its group is not
  // aborted) and tells it why.
  void remove_departing_rail(PeerId id, const std::string& why);
  // Recovery (membership_recovery.cpp): the members whose view conflicts with their group's.
  std::vector<std::pair<PeerId, std::string>> conflicting_rejoins() const;
  // Rails of nodes that did not come back whole.
  std::vector<std::pair<PeerId, std::string>> broken_nodes() const;
  // Whether a and b are next to each other in a ring of the current round.
  bool neighbours_in_round(PeerId a, PeerId b) const;
  // Claims (membership_claims.cpp). Whether `claimer` may claim anything about `accused`: its
  // neighbour in `rings`, or a member of its group when it links as a full mesh.
  bool may_claim(const Member& claimer, PeerId accused,
                 const std::map<uint32_t, std::vector<PeerId>>& rings) const;
  // Keeps the pair apart from now on and remembers who claimed it.
  void record_claim(PeerId claimer, PeerId accused);
  // Claims by `id` that the accused contradicted (it answered the round naming `id` reachable,
  // or came to update_topology without reporting the link lost).
  size_t contradicted_claims(PeerId id) const;
  // The round's LINKS_READY answers are all in: a claim the accused contradicted (it named the
  // claimer reachable) counts against the claimer.
  void judge_round_claims();
  // The committed epoch's REPORT_PEER_LOST claims, before the next round: one the accused did not
  // make in return while it stayed counts against the claimer.
  void judge_loss_claims();
  // Whether `claimer`'s claim that `accused` is unreachable counts: not when the accused is a
  // newcomer the master reached and the claimer never completed a link of its own.
  bool claim_counts(PeerId claimer, PeerId accused) const;
  // Adds an unconfirmed claim; true once the claimer has too many.
  bool count_unconfirmed(PeerId claimer, PeerId accused);
  // Removes the members with too many unconfirmed claims (Outbox::misbehaved first).
  void evict_conflicting(const std::vector<PeerId>& ids);

  Outbox& out_;
  std::map<PeerId, Member> members_;
  std::map<uint32_t, std::vector<PeerId>> rings_;
  std::set<PeerPair> banned_;
  // Who claimed each banned pair (one side or both); goes with banned_.
  std::map<PeerPair, std::set<PeerId>> claims_;
  // Per claimer, the members that contradicted its claims (membership_claims.cpp).
  std::map<PeerId, std::set<PeerId>> contradicted_;
  // REPORT_PEER_LOST claims of the committed epoch, judged when the next round starts.
  std::vector<Claim> loss_claims_;
  // Unreachable pairs that were not ring neighbours: they tried to link only because their
  // group is a full mesh, which no ring order can give them. A subset of banned_.
  std::set<PeerPair> unlinkable_;
  std::optional<Round> round_;
  NodeTable nodes_;
  PeerId last_id_ = 0;
  uint64_t committed_epoch_ = 0;
  uint64_t last_epoch_ = 0;   // last epoch number proposed
  uint64_t op_sequence_ = 0;  // advanced by the collective layer (issue 4)
  // Since the last commit: an active member or a link was lost, or the epoch failed (an ABORT, a
  // failed batch attempt). The members must re-form.
  bool ring_broken_ = false;
  bool joiners_held_ = false;  // the committed epoch's round held pending peers back
  bool recovering_ = false;    // restarted: members rejoin, no round starts (begin_recovery)
  std::map<PeerId, RejoinReport> rejoined_;  // the reports of this recovery
  // Whether every active member holds committed_epoch_ with rings_ exactly, as after a round this
  // master committed: only then may a proposal go to them as a change to that epoch
  // (topology_delta.hpp). Anything that sets the committed epoch another way (a restarted master
  // rebuilding it from reports) must leave it false, and members get whole proposals.
  bool base_is_shared_ = false;
  // Counts kept as members change, so that no message from one peer scans every member
  // (bench/run scale): per group, active members and those waiting; the totals; the members not
  // admitted yet.
  struct GroupCount {
    size_t active = 0, waiting = 0;
  };
  std::map<uint32_t, GroupCount> counts_;
  size_t active_total_ = 0, waiting_total_ = 0;
  std::set<PeerId> pending_;
  // sync_pending_flags() has nothing to tell while the flag is the one it last pushed and no
  // member became eligible for it since (admitted, or stopped waiting).
  std::optional<bool> flag_pushed_;
};

}  // namespace longhaul::master
