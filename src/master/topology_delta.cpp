#include "master/topology_delta.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace longhaul::master {

std::optional<wire::TopologyMsg> topology_delta(uint64_t base_epoch,
                                                const std::map<uint32_t, std::vector<PeerId>>& base,
                                                const wire::TopologyMsg& full) {
  if (base_epoch == 0) return std::nullopt;
  std::unordered_map<PeerId, const wire::MemberInfo*> proposed;
  for (const auto& m : full.members) proposed.emplace(m.peer_id, &m);
  wire::TopologyMsg delta;
  delta.epoch = full.epoch;
  delta.base_epoch = base_epoch;
  std::unordered_set<PeerId> in_base;
  for (const auto& [group, order] : base)
    for (PeerId id : order) {
      in_base.insert(id);
      if (!proposed.contains(id)) delta.removed.push_back(id);
    }
  std::sort(delta.removed.begin(), delta.removed.end());
  for (const auto& ring : full.rings) {
    // The base ring without the removed members must be where the proposed ring starts, and
    // what follows it must be new: then the receiver rebuilds the ring from its own copy.
    size_t kept = 0;
    if (auto it = base.find(ring.group); it != base.end())
      for (PeerId id : it->second) {
        if (!proposed.contains(id)) continue;
        if (kept >= ring.order.size() || ring.order[kept] != id) return std::nullopt;
        ++kept;
      }
    wire::RingInfo appended{ring.group,
                            {ring.order.begin() + static_cast<ptrdiff_t>(kept), ring.order.end()}};
    for (PeerId id : appended.order) {
      if (in_base.contains(id)) return std::nullopt;  // moved within the ring, or to another
      delta.members.push_back(*proposed.at(id));
    }
    if (!appended.order.empty()) delta.rings.push_back(std::move(appended));
  }
  return delta;
}

}  // namespace longhaul::master
