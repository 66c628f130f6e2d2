#include "peer/topology.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace longhaul::peer {

namespace {

// `base` without the removed peers, with the new ones added and appended to their rings.
Result<Topology> apply_change(const wire::TopologyMsg& m, const Topology& base) {
  const std::set<PeerId> removed(m.removed.begin(), m.removed.end());
  Topology t;
  t.epoch = m.epoch;
  std::set<PeerId> present;
  for (const auto& member : base.members) {
    if (removed.contains(member.peer_id)) continue;
    t.members.push_back(member);
    present.insert(member.peer_id);
  }
  if (t.members.size() + removed.size() != base.members.size())
    return protocol_error(
        fmt::format("epoch {} removes a peer epoch {} does not have", m.epoch, m.base_epoch));
  for (const auto& member : m.members) {
    if (!present.insert(member.peer_id).second)
      return protocol_error(fmt::format("epoch {} adds peer {}, already in epoch {}", m.epoch,
                                        member.peer_id, m.base_epoch));
    t.members.push_back(member);
  }
  for (const auto& [group, order] : base.rings)
    for (PeerId id : order)
      if (!removed.contains(id)) t.rings[group].push_back(id);
  for (const auto& ring : m.rings)
    t.rings[ring.group].insert(t.rings[ring.group].end(), ring.order.begin(), ring.order.end());
  return t;
}

}  // namespace

Result<Topology> Topology::from_message(const wire::TopologyMsg& m, PeerId self, uint32_t group,
                                        const Topology* base) {
  Topology t;
  if (m.base_epoch == 0) {
    t.members = m.members;
    for (const auto& ring : m.rings) t.rings[ring.group] = ring.order;
  } else {
    if (!base || base->epoch != m.base_epoch)
      return protocol_error(fmt::format("epoch {} is a change to epoch {}, but this peer is in {}",
                                        m.epoch, m.base_epoch, base ? base->epoch : 0));
    auto changed = apply_change(m, *base);
    if (!changed) return changed.status();
    t = std::move(*changed);
  }
  t.epoch = m.epoch;
  t.self = self;
  t.group = group;
  auto it = t.rings.find(group);
  if (it == t.rings.end() ||
      std::find(it->second.begin(), it->second.end(), self) == it->second.end())
    return protocol_error(fmt::format("epoch {} does not place peer {} in the ring of group {}",
                                      m.epoch, self, group));
  return t;
}

size_t Topology::rank() const {
  const auto& r = ring();
  return static_cast<size_t>(std::find(r.begin(), r.end(), self) - r.begin());
}

std::vector<PeerId> Topology::neighbours() const {
  const auto& r = ring();
  const size_t n = r.size(), i = rank();
  std::vector<PeerId> out;
  if (n <= 1) return out;
  out.push_back(r[(i + n - 1) % n]);
  if (r[(i + 1) % n] != out.front()) out.push_back(r[(i + 1) % n]);
  return out;
}

std::vector<PeerId> Topology::others() const {
  std::vector<PeerId> out;
  for (PeerId p : ring())
    if (p != self) out.push_back(p);
  return out;
}

const wire::MemberInfo* Topology::member(PeerId id) const {
  for (const auto& m : members)
    if (m.peer_id == id) return &m;
  return nullptr;
}

}  // namespace longhaul::peer
