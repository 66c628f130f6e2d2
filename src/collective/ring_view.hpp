// What a collective needs from the peer mesh: the epoch, this peer's place in the group's ring,
// and the data links to the other members (any transport::DataLink: the network's, or in-process
// ones in tests). A snapshot: the shared_ptrs keep the links alive for as
// long as an operation that took the view runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/data_link.hpp"

namespace longhaul::collective {

struct RingView {
  uint64_t epoch = 0;
  size_t rank = 0;  // position in the ring order
  size_t size = 1;  // members of the group
  // links[r] reaches the member at ring position r; null for this peer and for members it has no
  // link to. The ring schedule needs left and right; the direct schedule needs every member.
  std::vector<std::shared_ptr<transport::DataLink>> links;
  // Every member was asked to link to every other (the communicators' full_mesh): the same on
  // all members, unlike which links are up at this moment. Schedule::kAuto decides on this, so
  // that a member that lost a link refuses the operation the others start instead of choosing
  // another schedule than theirs.
  bool full_mesh = false;
  // ids[r]: the peer id of the member at ring position r, to name it in messages; may be empty
  // (tests), and a member is then named by its ring position.
  std::vector<uint64_t> ids;

  std::string member_name(size_t r) const {
    return r < ids.size()
               ? "peer " + std::to_string(ids[r]) + " (ring position " + std::to_string(r) + ")"
               : "ring position " + std::to_string(r);
  }
  size_t left() const { return (rank + size - 1) % size; }
  size_t right() const { return (rank + 1) % size; }
  bool has_links_to_all() const {
    for (size_t r = 0; r < size; ++r)
      if (r != rank && (r >= links.size() || !links[r])) return false;
    return true;
  }
};

}  // namespace longhaul::collective
