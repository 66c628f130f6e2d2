// What a peer knows about one epoch: the members and the ring order of every group.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "net/link.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::peer {

using PeerId = uint64_t;

struct Topology {
  uint64_t epoch = 0;
  PeerId self = 0;
  uint32_t group = 0;
  std::vector<wire::MemberInfo> members;
  std::map<uint32_t, std::vector<PeerId>> rings;

  // Builds the view of `self` from a proposal; fails if the proposal does not place `self` in
  // the ring of `group`. A proposal that is a change (m.base_epoch != 0) applies to `base`, the
  // committed epoch, which must be that epoch (null before admission: only whole proposals).
  static Result<Topology> from_message(const wire::TopologyMsg& m, PeerId self, uint32_t group,
                                       const Topology* base = nullptr);

  size_t world_size() const { return members.size(); }
  size_t group_count() const { return rings.size(); }
  const std::vector<PeerId>& ring() const { return rings.at(group); }
  size_t group_world_size() const { return ring().size(); }
  size_t rank() const;
  // The left and right neighbours in the ring, without duplicates and without self.
  std::vector<PeerId> neighbours() const;
  // Every other member of the group's ring (the full mesh).
  std::vector<PeerId> others() const;
  const wire::MemberInfo* member(PeerId id) const;
};

// The data links of the committed epoch that a ring collective uses. For a ring of two both
// neighbours are the same peer and share one link; for a ring of one both links are null.
struct RingLinks {
  uint64_t epoch = 0;
  std::vector<PeerId> ring;
  size_t rank = 0;
  PeerId left = 0;
  PeerId right = 0;
  std::shared_ptr<net::Link> left_link;
  std::shared_ptr<net::Link> right_link;
  // by_rank[r] links to the member at ring position r (null for self and for members without a
  // link: with a ring-only mesh only the neighbours have one).
  std::vector<std::shared_ptr<net::Link>> by_rank;
};

}  // namespace longhaul::peer
