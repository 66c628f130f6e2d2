// All the chunk, segment and slot arithmetic of one all-reduce, computed once per operation.
//
// The buffer is cut into one chunk per member (chunk c is owned, i.e. finally reduced, by one
// member) and each chunk into segments() segments: the unit that is sent, received and reduced
// while other segments are still in flight. The schedules ask the plan which chunk a step moves
// and where its bytes wait; they never compute an index themselves.
//
// A reduce-scatter (spec.reduce_scatter()) runs the first phase only, and its chunks are the
// caller's: the member at ring position r ends with the caller's chunk r, so on the ring (where
// the member r finishes chunk r+1) chunk c is the caller's chunk c-1.
//
// Scratch is one arena of equal slots, each as large as the largest segment on the wire (encoded
// when a codec is used). A slot is named by its role, a lane and a segment:
//   role       ring lane              direct lane           holds
//   kReduceIn  reduce-scatter step%2  the sender's q        a contribution or partial sum that
//                                                           arrived (ring: two per segment, so
//                                                           step s+1's receive is posted before
//                                                           step s is reduced)
//   kGatherIn  all-gather step        the owner's q         encoded: the owner's final bytes
//   kOut       reduce-scatter step    the owner's q         encoded: what this member sends
//   kFinal     0                      0                     encoded: its own chunk's final bytes
// where q = peer_index(p) in 0..N-2 numbers the other members. Unencoded segments are sent from
// and gathered into the output itself, so only kReduceIn exists then.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "collective/allreduce_spec.hpp"
#include "collective/partition.hpp"

namespace longhaul::collective {

class StepPlan {
 public:
  enum class Slot { kReduceIn, kGatherIn, kOut, kFinal };

  StepPlan(Schedule schedule, size_t members, size_t rank, const AllReduceSpec& spec);

  size_t members() const { return n_; }
  size_t rank() const { return rank_; }
  // Steps per phase: every member's chunk passes N-1 hops (ring) or N-1 senders (direct).
  size_t steps() const { return n_ - 1; }
  // Whether the all-gather phase runs (not for a reduce-scatter).
  bool gathers() const { return gathers_; }
  // The chunk this member finishes: r+1 on the ring, r direct.
  size_t own_chunk() const { return ring_ ? (rank_ + 1) % n_ : rank_; }
  size_t segments() const { return part_.segments(); }
  const Partition& partition() const { return part_; }

  // Segment `seg` of chunk `chunk`, in elements, and its bytes in the output and on the wire.
  Range segment(size_t chunk, size_t seg) const { return part_.segment(chunk, seg); }
  size_t bytes(size_t chunk, size_t seg) const { return segment(chunk, seg).count * elem_; }
  size_t wire_bytes(size_t chunk, size_t seg) const;
  size_t element_size() const { return elem_; }

  // Ring: at reduce-scatter step s this member sends chunk r-s and receives chunk r-s-1; after
  // the last step (s = N-2) it owns chunk r+1. At all-gather step t it receives chunk r-t.
  size_t ring_send_chunk(size_t step) const { return (rank_ + n_ - step) % n_; }
  size_t ring_reduce_chunk(size_t step) const { return (rank_ + 2 * n_ - step - 1) % n_; }
  size_t ring_gather_chunk(size_t step) const { return (rank_ + n_ - step) % n_; }
  bool ring_last_reduce_step(size_t step) const { return step + 2 >= n_; }
  // Every chunk, in the order the schedule first reads this member's input of it: ring, the chunk
  // sent at step 0 and then each reduce-scatter step's; direct, the other members' chunks (all
  // sent at once) and then its own.
  std::vector<size_t> input_order() const;
  // The chunks this member only sends as its contribution and never reduces into: ring, the one
  // sent at step 0; direct, every other member's.
  std::vector<size_t> send_only_chunks() const;

  // Direct: the other members numbered 0..N-2 in ring order after this one.
  size_t peer_index(size_t peer) const { return (peer + n_ - rank_ - 1) % n_; }
  size_t peer_at(size_t index) const { return (rank_ + index + 1) % n_; }

  // The transfers (sends and receives) a successful operation completes.
  size_t transfers() const { return (gathers_ ? 4 : 2) * steps() * segments(); }
  size_t arena_bytes() const { return slots_ * slot_bytes_; }
  // The slot of `role`, `lane` and segment `seg` in `arena`, holding segment `seg` of `chunk` as
  // it travels (wire_bytes long).
  std::span<std::byte> slot(std::byte* arena, Slot role, size_t lane, size_t chunk,
                            size_t seg) const;

 private:
  const size_t n_;
  const size_t rank_;
  const bool ring_;
  const bool gathers_;
  const size_t elem_;
  const quant::Codec codec_;
  const size_t block_;
  const Partition part_;
  size_t slot_bytes_ = 0;
  size_t slots_ = 0;
  size_t base_[4] = {};  // first slot of each role
};

}  // namespace longhaul::collective
