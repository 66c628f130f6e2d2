#include "peer/topology.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace longhaul::peer {

Result<Topology> Topology::from_message(const wire::TopologyMsg& m, PeerId self, uint32_t group) {
  Topology t;
  t.epoch = m.epoch;
  t.self = self;
  t.group = group;
  t.members = m.members;
  for (const auto& ring : m.rings) t.rings[ring.group] = ring.order;
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
