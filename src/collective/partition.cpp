#include "collective/partition.hpp"

#include <algorithm>

#include "collective/tag.hpp"

namespace longhaul::collective {

static Range split(size_t total, size_t parts, size_t index) {
  const size_t base = total / parts, extra = total % parts;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

Partition::Partition(size_t count, size_t members, size_t segment_elems)
    : count_(count), members_(members) {
  const size_t largest_chunk = (count + members - 1) / members;
  segments_ = std::clamp<size_t>(
      (largest_chunk + segment_elems - 1) / std::max<size_t>(segment_elems, 1), 1, kMaxSegments);
}

Range Partition::chunk(size_t c) const {
  return split(count_, members_, c);
}

Range Partition::segment(size_t c, size_t s) const {
  const Range ch = chunk(c);
  const Range seg = split(ch.count, segments_, s);
  return {ch.begin + seg.begin, seg.count};
}

}  // namespace longhaul::collective
