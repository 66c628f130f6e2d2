// The master's side of PeerSession::agree_in_node: a barrier for the rails of one node that ORs
// their flags (docs/protocol.md, "Node agreement").
//
// The rails of a node are tied by the trainer's own intra-node collectives (FSDP's), so whatever
// one rail does that blocks on the whole run (re-forming the epoch: every member of every group
// waits in update_topology) all of them must do at the same step, or the node hangs: the rail in
// update_topology waits for its siblings, which wait for it in their next intra-node collective.
// The rails decide such steps together here. Each rail reaches agreement points 1, 2, ... with its
// flags; once every rail of the node has reached a point, each gets the OR of their flags, so all
// of them act on the same answer however late each saw what made it ask.
//
// A point is answered when every rail of a complete node has reached it, or every rail still in a
// node that one rail left gracefully (the others follow, docs/protocol.md "Nodes"). A node that
// loses a rail abruptly is evicted whole, so its open point is simply forgotten. Rails that reach
// different points, or one point with different kinds, broke the contract (they must make the
// same calls): the second of them to report is a protocol violation, and its node goes. (A rail
// that diverged and then waits in a trainer's collective instead sends nothing; its node then
// waits until the trainer gives up.)
//
// Pure bookkeeping on the master's strand, like BatchArbiter: events are calls, answers go out
// through the Outbox. Nothing is journalled: after a master restart the rails that still wait
// report their point again (session_reconnect.cpp), and every rail's REJOIN carries the last
// point it has the answer to. A previous master may have died between sending one answer to one
// rail and to its sibling; the sibling, still waiting, then gets the answer its sibling reported,
// whichever of the REJOIN and the sibling's report comes first. (Without that, a rail whose lost
// answer said "re-form" would wait for it in update_topology while its sibling waited for the
// answer: the node would hang.)
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "master/membership.hpp"

namespace longhaul::master {

class NodeAgreement {
 public:
  NodeAgreement(Outbox& outbox, const Membership& membership)
      : out_(outbox), membership_(membership) {}

  // A non-OK result is a protocol violation by `id` (the caller drops it).
  Status on_agree(PeerId id, const wire::NodeAgreeMsg& agree);
  // `id`, a rail that rejoined a restarted master (its node record holds it), has the answer
  // `answer` to its node's point `answered` (0: to none yet). A non-OK result is a protocol
  // violation by `id`.
  Status on_rejoin(PeerId id, uint64_t answered, uint32_t answer);
  // `who` is no longer a member (Outbox::peer_left, before its node's record changes).
  void on_peer_left(PeerId who, bool graceful);

  size_t open_points() const { return open_.size(); }

 private:
  struct Point {
    uint64_t point = 0;
    uint32_t kind = 0;          // what the first rail to reach it said it is
    uint32_t flags = 0;         // OR of the flags reported so far
    std::set<PeerId> reached;   // the rails that reported `point`
    std::set<PeerId> departed;  // rails that left gracefully while it was open
  };
  // A node's last answered point: by this master, or by its predecessor as a REJOIN reported it.
  struct Answer {
    uint64_t point = 0;
    uint32_t flags = 0;
    std::set<PeerId> told;  // the rails known to have it
  };
  // Answers every rail of `node` and closes the point when nobody is missing.
  void answer_if_complete(const Node& node);
  // Gives `answer` to `rails`, and records it as `node`'s last.
  void give_answer(NodeId node, uint64_t point, uint32_t flags, const std::vector<PeerId>& rails);
  void forget(NodeId node);

  Outbox& out_;
  const Membership& membership_;
  std::map<NodeId, Point> open_;
  std::map<NodeId, Answer> answered_;
};

}  // namespace longhaul::master
