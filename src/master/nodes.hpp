// The master's node records: which peers are the rails (ranks) of one machine, so that the
// machine, not the process, is the unit of membership (docs/protocol.md, "Nodes").
//
// A peer that registers with a node name is one rail of that node; a peer without one is a node
// of one rail and has no record here. A node record binds its rails' peer ids: Membership admits
// the node's rails only once every rail has registered, moves them into each epoch together and,
// when any rail dies or is removed, evicts the others. The table checks each claim against the
// record (same rail count, a rail in range and not taken, one peer group per rail, the same
// machine) so that two machines claiming one identity, or a rank registering twice, get a clear
// refusal instead of a silently merged node.
//
// Pure bookkeeping on the master's strand, like Membership: no sockets, no clock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "master/ring_order.hpp"

namespace longhaul::master {

// What a registering peer says about its node (wire::RegisterMsg), and where it connected from.
struct NodeClaim {
  std::string name;  // empty: a node of one rail (no record)
  uint32_t rail = 0;
  uint32_t rails = 1;
  uint32_t group = 0;
  std::string host;  // the address the master sees the control connection come from
};

// Every record gets a fresh id, so a node restarted under the same name is a new node.
using NodeId = uint64_t;

struct Node {
  NodeId id = 0;
  std::string name;
  uint32_t rails = 1;
  std::string host;
  std::map<uint32_t, PeerId> members;   // rail -> peer
  std::map<uint32_t, uint32_t> groups;  // rail -> peer group
  // A rail left gracefully: the others follow (each leaves, or is evicted if it asks to go on).
  bool departing = false;
  std::string departing_reason;

  bool complete() const { return members.size() == rails; }
  // "node 'NAME'"
  std::string label() const;
  // The rail `peer` holds (0 when it is not a rail of this node).
  uint32_t rail_of(PeerId peer) const;
  // The registered rails in ascending order.
  std::vector<uint32_t> registered_rails() const;
  // Their peers, in the same order.
  std::vector<PeerId> member_peers() const;
};

class NodeTable {
 public:
  // Why this claim cannot join (LH_ERR_INVALID_ARGUMENT with the reason), or OK. Changes nothing.
  Status check(const NodeClaim& claim) const;
  // Records peer `id` as the claimed rail (check() passed). Returns its node, or nullptr for a
  // claim without a node name.
  const Node* add(PeerId id, const NodeClaim& claim);
  // The peer's node, or nullptr when it has none (or is unknown).
  const Node* node_of(PeerId id) const;
  const Node* find(NodeId id) const;
  // Forgets the peer. When it was a rail of a node, returns the node's other rails (peer ids):
  // after an abrupt loss the whole record goes and every sibling must be evicted; after a
  // graceful leave (`graceful`) the node is marked departing and its other rails stay recorded
  // until they go too (the result is then empty).
  std::vector<PeerId> remove(PeerId id, bool graceful);
  // Whether `id` may take part in a round: it has no node, or its node is complete.
  bool admissible(PeerId id) const;
  const std::map<NodeId, Node>& nodes() const { return nodes_; }

 private:
  Node* by_name(const std::string& name);
  const Node* by_name(const std::string& name) const;

  std::map<NodeId, Node> nodes_;
  std::map<PeerId, NodeId> peers_;
  NodeId last_id_ = 0;
};

}  // namespace longhaul::master
