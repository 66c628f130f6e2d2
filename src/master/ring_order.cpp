#include "master/ring_order.hpp"

#include <algorithm>

namespace longhaul::master {
namespace {

struct Search {
  const std::vector<PeerId>& members;
  const std::set<PeerPair>& banned;
  uint64_t steps_left;
  std::vector<PeerId> path;
  std::vector<bool> used;

  bool allowed(PeerId a, PeerId b) const { return !banned.contains(make_peer_pair(a, b)); }

  // Depth-first, candidates in ascending id order, so the first ring found is the
  // lexicographically smallest one starting at the smallest id.
  bool extend() {
    if (path.size() == members.size()) return allowed(path.back(), path.front());
    for (size_t i = 0; i < members.size(); ++i) {
      if (used[i] || !allowed(path.back(), members[i])) continue;
      if (steps_left == 0) return false;
      --steps_left;
      used[i] = true;
      path.push_back(members[i]);
      if (extend()) return true;
      path.pop_back();
      used[i] = false;
    }
    return false;
  }
};

}  // namespace

std::optional<std::vector<PeerId>> solve_ring(std::vector<PeerId> members,
                                              const std::set<PeerPair>& banned,
                                              uint64_t step_limit) {
  std::sort(members.begin(), members.end());
  if (members.size() <= 1) return members;
  if (members.size() == 2) {
    if (banned.contains(make_peer_pair(members[0], members[1]))) return std::nullopt;
    return members;
  }
  Search search{
      members, banned, step_limit, {members[0]}, std::vector<bool>(members.size(), false)};
  search.used[0] = true;
  if (!search.extend()) return std::nullopt;
  return search.path;
}

}  // namespace longhaul::master
