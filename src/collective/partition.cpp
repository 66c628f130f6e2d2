#include "collective/partition.hpp"

#include <algorithm>

#include "collective/tag.hpp"

namespace longhaul::collective {

static Range split(size_t total, size_t parts, size_t index) {
  const size_t base = total / parts, extra = total % parts;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

static size_t segments_for(size_t largest_chunk, size_t segment_elems) {
  return std::clamp<size_t>(
      (largest_chunk + segment_elems - 1) / std::max<size_t>(segment_elems, 1), 1, kMaxSegments);
}

Partition::Partition(size_t count, size_t members, size_t segment_elems)
    : count_(count),
      members_(members),
      segments_(segments_for((count + members - 1) / members, segment_elems)) {}

Partition::Partition(std::vector<Range> chunks, size_t segment_elems)
    : count_(0), members_(chunks.size()), chunks_(std::move(chunks)) {
  size_t largest = 0;
  for (const Range& c : chunks_) {
    largest = std::max(largest, c.count);
    count_ += c.count;
  }
  segments_ = segments_for(largest, segment_elems);
}

Range Partition::chunk(size_t c) const {
  return chunks_.empty() ? split(count_, members_, c) : chunks_[c];
}

Range Partition::segment(size_t c, size_t s) const {
  const Range ch = chunk(c);
  const Range seg = split(ch.count, segments_, s);
  return {ch.begin + seg.begin, seg.count};
}

}  // namespace longhaul::collective
