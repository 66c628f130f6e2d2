// Ring order: which peer sits next to which in a group's ring.
//
// The master computes each group's ring from scratch at every epoch: ascending peer id (join
// order) unless some pairs of peers have reported that they cannot reach each other, in which
// case the first ring in lexicographic order that keeps every such pair apart is chosen. The
// result depends only on the inputs, so the same members and reports always give the same ring.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace longhaul::master {

using PeerId = uint64_t;
// An unordered pair of peers, stored as (smaller id, larger id).
using PeerPair = std::pair<PeerId, PeerId>;
inline PeerPair make_peer_pair(PeerId a, PeerId b) {
  return a < b ? PeerPair{a, b} : PeerPair{b, a};
}

// A ring over `members` (any order; duplicates are not allowed) in which no two neighbours form a
// pair in `banned`, or nullopt if none exists (or none was found within `step_limit` search
// steps, so the search is bounded even for large adversarial inputs). A ring of one peer has no
// neighbours; a ring of two has the single pair as both neighbours.
std::optional<std::vector<PeerId>> solve_ring(std::vector<PeerId> members,
                                              const std::set<PeerPair>& banned,
                                              uint64_t step_limit = 1'000'000);

}  // namespace longhaul::master
