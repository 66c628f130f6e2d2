// A node's rank as one member of two groups at once: its local group (the node's other ranks, on
// this machine) and its rail (rank r of every node, over the network, through its communicator),
// and the hierarchical all-reduce over both (docs/collectives.md, "Node-local groups").
//
// The all-reduce of a node of L ranks, rank r:
//   0. admission: when any rank of the node sees peers pending, every rank of the node calls
//      update_topology (a rank alone in it would wait for its siblings, who would wait for it in
//      the local group);
//   1. local reduce-scatter: rank r holds chunk r of the node's sum;
//   2. rank r all-reduces chunk r over its rail; the master decides the outcome for the whole
//      rail (peer/settle.hpp);
//   3. the node's ranks agree (LocalGroup::agree): the operation succeeded exactly when every
//      rail did, and since each rail's outcome is the same on all its members, every node comes
//      to the same answer; a failure anywhere is retried by every rank of every node;
//   4. local all-gather of the chunks into the output.
// The network carries 1/L of the buffer per rank, L rails in parallel: the node as a whole sends
// what one flat all-reduce would, over L sets of links.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collective/allreduce_spec.hpp"
#include "node/local_group.hpp"
#include "peer/collectives.hpp"
#include "peer/group.hpp"
#include "peer/settle.hpp"

namespace longhaul::node {

class NodeGroup {
 public:
  // Binds `local` (whose rank and size must be the rail's index and the rail count) to the
  // rail's group: from now on, when the rail's member fails for good (`failures`: the master
  // evicted the node because a sibling died, or removed this rank), the local group is aborted,
  // so no sibling waits in it. `group`, `collectives` and `failures` (the rail's member: a
  // Communicator is all three) must outlive the NodeGroup.
  NodeGroup(peer::GroupControl& group, peer::Collectives& collectives,
            peer::FailureSignal& failures, std::unique_ptr<node::LocalGroup> local);
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  node::LocalGroup& local() { return *local_; }

  // The hierarchical all-reduce above of spec.count elements (spec: an all-reduce's, host
  // memory, no reduce-scatter output; a residual holds spec.count floats, of which this rank
  // uses and updates its chunk's). Every rank of every node calls it with the same arguments at
  // the same point of its sequence of collectives, and nothing else runs on the communicator
  // meanwhile. Pending peers are admitted at its start (step 0), on every rank of the node at
  // once; a caller that calls update_topology itself must do so on every rank of the node
  // together. A failed attempt anywhere fails it on every rank of every node; each rank then
  // calls update_topology without admitting joiners and retries, up to max_attempts attempts.
  // Returns OK exactly when it returns OK on every rank of every node, with the result in
  // spec.output, bit-identical everywhere. Each retry starts from the node's sum and the residual
  // as they were. On failure the input is intact (unless in place and the node itself failed in
  // its final local step) and the output unspecified: LH_ERR_PEER_LOST / LH_ERR_ABORTED after
  // the last attempt (call update_topology and retry), LH_ERR_NODE_EVICTED when the node is
  // finished, or another error. A node whose local group failed (a sibling dead, silent or gone,
  // an abort) closes its session, so the master evicts it whole and the other nodes retry
  // without it rather than count on a node that can no longer take part. One call at a time.
  Status allreduce(const collective::AllReduceSpec& spec, uint32_t max_attempts);

 private:
  // Steps 0 to 4 above.
  Status reduce_over_node_and_rails(const collective::AllReduceSpec& spec, uint32_t max_attempts);
  // Step 0 above.
  Status admit_pending_peers();
  // Steps 2 and 3 above, settled with the rail's group and the node.
  Status run_attempts(const collective::AllReduceSpec& rail_spec, uint32_t max_attempts);
  Status reduce_rail(const collective::AllReduceSpec& rail);
  // The master's decision on the rail's attempt, ANDed with the node's other rails' (step 3).
  Result<peer::SettleSteps::Outcome> decide_with_siblings(const Status& local, bool on_rail);
  peer::GroupControl& group_;
  peer::Collectives& collectives_;
  peer::FailureSignal& failures_;
  std::unique_ptr<node::LocalGroup> local_;
  uint64_t listener_id_ = 0;
  // Kept from call to call (a trainer calls with the same sizes every step): this rank's chunk,
  // and the node's sum and the residual as they were before the rail's first attempt.
  std::vector<std::byte> chunk_;
  std::vector<std::byte> node_sum_;
  std::vector<float> residual_before_;
};

// The shared-memory name of a node's local group when the caller gives none: the same for every
// rank of one node of one run (from the master's address and the node's name), different for
// two runs on one machine; a node of one rank gets a name of its own.
std::string default_local_group_name(const std::string& master_address, const std::string& node,
                                     uint32_t rails);

}  // namespace longhaul::node
