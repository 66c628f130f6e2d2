// How a collective cuts a buffer: into one chunk per member (chunk c is owned by one member: its
// reducer in an all-reduce, its contributor in an all-gather), and each chunk into the same number
// of segments, the unit that is sent, received and reduced while other segments are still in
// flight (the pipeline).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace longhaul::collective {

struct Range {
  size_t begin = 0;  // in elements
  size_t count = 0;
};

class Partition {
 public:
  // `count` elements over `members` chunks of sizes that differ by at most one element, each cut
  // into segments of about `segment_elems`.
  Partition(size_t count, size_t members, size_t segment_elems);
  // The chunks given, chunk c at chunks[c] (any place in the buffer, any size, zero included),
  // each cut into segments of about `segment_elems`.
  Partition(std::vector<Range> chunks, size_t segment_elems);

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
  std::vector<Range> chunks_;  // explicit chunks; empty: the even split of count_
};

}  // namespace longhaul::collective
