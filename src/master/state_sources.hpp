// One source node per fetching node: every rail of a node that fetches shared state takes it from
// the same other node (docs/protocol.md, "Nodes"), so the shards a joining machine downloads all
// come from one replica. The election (state/election.hpp) lets a fetcher use every peer that
// holds the elected content; for a rail of a node this narrows the plan to the one rail of the
// chosen source node in the same group.
//
// The choice is made when a node's first rail is planned and kept for its other rails (and later
// syncs) while the source node lives and its rail holds what the fetcher needs; otherwise the
// oldest node whose rail holds all of it is chosen anew. A fetcher no single node can serve keeps
// the election's sources (logged). Pure logic on the master's strand.
#pragma once

#include <cstdint>
#include <map>

#include "master/nodes.hpp"
#include "state/election.hpp"

namespace longhaul::master {

class StateSources {
 public:
  // Narrows the fetching plans of `election` (group `group`) to one source node per node.
  void apply(uint32_t group, const NodeTable& nodes, state::Election& election);

 private:
  struct Choice {
    NodeId source = 0;
    uint64_t revision = 0;  // the group's revision when the choice was made
  };
  // The source node's rail that serves `fetcher` (a rail of `node`), or 0 when none can.
  PeerId choose(const Node& node, const NodeTable& nodes, const wire::StatePlanMsg& plan,
                uint64_t revision);
  // Plan `plan` fetches everything from `source` alone.
  static void narrow(wire::StatePlanMsg& plan, PeerId source);

  std::map<NodeId, Choice> chosen_;  // fetching node -> its source node
};

}  // namespace longhaul::master
