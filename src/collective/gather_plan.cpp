#include "collective/gather_plan.hpp"

#include <algorithm>

namespace longhaul::collective {
namespace {

Partition contributions(const GatherSpec& spec) {
  std::vector<Range> chunks;
  size_t begin = 0;
  for (size_t count : spec.counts) {
    chunks.push_back({begin, count});
    begin += count;
  }
  const size_t elem = quant::element_size(spec.dtype);
  return Partition(std::move(chunks), std::max<size_t>(1, spec.segment_bytes / elem));
}

}  // namespace

GatherPlan::GatherPlan(Schedule, size_t members, size_t rank, const GatherSpec& spec)
    : n_(members),
      rank_(rank),
      elem_(quant::element_size(spec.dtype)),
      codec_(spec.codec),
      block_(spec.block),
      encoded_(spec.codec != quant::Codec::kNone),
      empty_(spec.total() == 0),
      part_(contributions(spec)) {
  for (size_t c = 0; c < n_; ++c)  // segment 0 of a chunk is its largest
    slot_bytes_ = std::max(slot_bytes_, wire_bytes(c, 0));
}

size_t GatherPlan::wire_bytes(size_t chunk, size_t seg) const {
  const size_t count = segment(chunk, seg).count;
  if (!encoded_ || count == 0) return count * elem_;
  auto n = quant::encoded_size(count, codec_, block_);
  return n ? *n : 0;  // the codec and block were validated with the request
}

bool GatherPlan::travels(size_t chunk, size_t seg) const {
  return empty_ ? seg == 0 : segment(chunk, seg).count > 0;
}

size_t GatherPlan::travelling(size_t chunk) const {
  size_t n = 0;
  for (size_t s = 0; s < segments(); ++s) n += travels(chunk, s) ? 1 : 0;
  return n;
}

size_t GatherPlan::transfers(Schedule schedule) const {
  size_t sends = 0, receives = 0;
  for (size_t c = 0; c < n_; ++c) {
    const size_t k = travelling(c);
    if (c == rank_) {
      sends += schedule == Schedule::kRing ? k : k * steps();
      continue;
    }
    receives += k;
    // On the ring every chunk but the right neighbour's own goes on.
    if (schedule == Schedule::kRing && c != (rank_ + 1) % n_) sends += k;
  }
  return sends + receives;
}

std::span<std::byte> GatherPlan::slot(std::byte* arena, size_t chunk, size_t seg) const {
  return {arena + (chunk * segments() + seg) * slot_bytes_, wire_bytes(chunk, seg)};
}

}  // namespace longhaul::collective
