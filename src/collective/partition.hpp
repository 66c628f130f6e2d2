// How an all-reduce cuts a buffer: into one chunk per ring member (chunk c is owned, i.e. finally
// reduced, by one member), and each chunk into the same number of segments, the unit that is sent,
// received and reduced while other segments are still in flight (the pipeline).
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::collective {

struct Range {
  size_t begin = 0;  // in elements
  size_t count = 0;
};

class Partition {
 public:
  // `count` elements over `members` chunks, each cut into segments of about `segment_elems`.
  Partition(size_t count, size_t members, size_t segment_elems);

  size_t members() const { return members_; }
  size_t segments() const { return segments_; }
  Range chunk(size_t c) const;
  // Segment s of chunk c; every chunk has segments() segments, some possibly empty when the
  // chunk has fewer elements than that.
  Range segment(size_t c, size_t s) const;

 private:
  size_t count_;
  size_t members_;
  size_t segments_;
};

// An op id on a link, unique while it can matter: the epoch (16 bits), the collective's sequence
// number within the epoch (20 bits), the phase (reduce-scatter or all-gather), the ring step
// (8 bits) and the segment (19 bits). Every member computes the same ids because every member
// issues the group's collectives in the same order within an epoch, and counters restart with
// each epoch. The epoch field is 1 + epoch mod 65535, never 0, so a collective's ids are all at
// least 2^48 and never meet the small ids that the other users of a link (the state fetcher's
// requests) count up from 1.
enum class Phase : uint64_t { kReduceScatter = 0, kAllGather = 1 };
inline constexpr size_t kMaxRingSteps = 255;
inline constexpr size_t kMaxSegments = size_t{1} << 19;

// The bits of an op id that name the collective (epoch and sequence number), for cancelling all of
// its transfers at once.
inline constexpr uint64_t kOperationMask = ~((uint64_t{1} << 28) - 1);

inline uint64_t op_id(uint64_t epoch, uint64_t seq, Phase phase, size_t step, size_t segment) {
  return ((epoch % 0xFFFF + 1) << 48) | ((seq & 0xFFFFF) << 28) |
         (static_cast<uint64_t>(phase) << 27) | ((static_cast<uint64_t>(step) & 0xFF) << 19) |
         (static_cast<uint64_t>(segment) & 0x7FFFF);
}

}  // namespace longhaul::collective
