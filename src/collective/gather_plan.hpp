// The chunk, segment and slot arithmetic of one gathering operation (gather.hpp), computed once.
//
// Chunk c is member c's contribution, at its place in the output, cut into segments() segments
// like an all-reduce's chunks (partition.hpp). A segment with no elements does not travel (both
// ends know it from the counts), except in an operation with no elements at all: there segment 0
// of every chunk travels empty, so a barrier still passes every member's arrival around.
//
// Ring: member r sends its own chunk to its right at step 0; at step t it receives chunk r-1-t
// from its left and passes it on at step t+1 unless its right neighbour is that chunk's owner.
// Direct: member r sends its chunk to every member and receives every chunk from its owner, one
// step. Encoded, every chunk's segment has one scratch slot: the owner's encoding, or where the
// owner's bytes land.
#pragma once

#include <cstddef>
#include <span>

#include "collective/gather_spec.hpp"
#include "collective/partition.hpp"

namespace longhaul::collective {

class GatherPlan {
 public:
  GatherPlan(Schedule schedule, size_t members, size_t rank, const GatherSpec& spec);

  size_t members() const { return n_; }
  size_t rank() const { return rank_; }
  size_t steps() const { return n_ - 1; }
  size_t segments() const { return part_.segments(); }
  const Partition& partition() const { return part_; }
  size_t element_size() const { return elem_; }

  Range segment(size_t chunk, size_t seg) const { return part_.segment(chunk, seg); }
  size_t bytes(size_t chunk, size_t seg) const { return segment(chunk, seg).count * elem_; }
  size_t wire_bytes(size_t chunk, size_t seg) const;
  // Whether segment `seg` of `chunk` is sent at all.
  bool travels(size_t chunk, size_t seg) const;

  // Ring: the chunk that arrives from the left at step t, and whether it goes on to the right.
  size_t ring_recv_chunk(size_t step) const { return (rank_ + 2 * n_ - 1 - step) % n_; }
  bool ring_forwards(size_t step) const { return step + 1 < steps(); }
  // Direct: the other members, numbered 0..N-2 in ring order after this one.
  size_t peer_at(size_t index) const { return (rank_ + index + 1) % n_; }

  // The transfers (sends and receives) a successful operation completes.
  size_t transfers(Schedule schedule) const;
  size_t arena_bytes() const { return encoded_ ? n_ * segments() * slot_bytes_ : 0; }
  // Encoded: the slot of segment `seg` of `chunk` in `arena`.
  std::span<std::byte> slot(std::byte* arena, size_t chunk, size_t seg) const;

 private:
  // The segments of `chunk` that travel.
  size_t travelling(size_t chunk) const;

  const size_t n_;
  const size_t rank_;
  const size_t elem_;
  const quant::Codec codec_;
  const size_t block_;
  const bool encoded_;
  const bool empty_;  // no elements at all: a barrier
  const Partition part_;
  size_t slot_bytes_ = 0;
};

}  // namespace longhaul::collective
