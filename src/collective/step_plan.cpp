#include "collective/step_plan.hpp"

#include <algorithm>

namespace longhaul::collective {
namespace {

// The caller's chunks of a reduce-scatter, by ring position (the even split unless given).
std::vector<Range> caller_chunks(const AllReduceSpec& spec, size_t members) {
  std::vector<Range> chunks;
  const Partition even(spec.count, members, 1);
  size_t begin = 0;
  for (size_t r = 0; r < members; ++r) {
    const size_t count = spec.chunk_counts.empty() ? even.chunk(r).count : spec.chunk_counts[r];
    chunks.push_back({begin, count});
    begin += count;
  }
  return chunks;
}

Partition chunks_of(Schedule schedule, size_t members, const AllReduceSpec& spec) {
  const size_t segment_elems =
      std::max<size_t>(1, spec.segment_bytes / quant::element_size(spec.dtype));
  if (!spec.reduce_scatter() && spec.chunk_counts.empty())
    return Partition(spec.count, members, segment_elems);
  std::vector<Range> chunks = caller_chunks(spec, members);
  // On the ring the member at position r finishes chunk r+1: chunk c is the caller's c-1.
  if (schedule == Schedule::kRing) std::rotate(chunks.rbegin(), chunks.rbegin() + 1, chunks.rend());
  return Partition(std::move(chunks), segment_elems);
}

}  // namespace

StepPlan::StepPlan(Schedule schedule, size_t members, size_t rank, const AllReduceSpec& spec)
    : n_(members),
      rank_(rank),
      ring_(schedule == Schedule::kRing),
      gathers_(!spec.reduce_scatter()),
      elem_(quant::element_size(spec.dtype)),
      codec_(spec.codec),
      block_(spec.block),
      part_(chunks_of(schedule, members, spec)) {
  if (n_ < 2 || spec.count == 0) return;  // nothing travels
  const bool encoded = codec_ != quant::Codec::kNone;
  const bool ring = ring_;
  const size_t lanes[4] = {
      ring ? std::min<size_t>(2, steps()) : steps(),  // kReduceIn
      encoded && gathers_ ? steps() : 0,              // kGatherIn
      encoded ? steps() : 0,                          // kOut
      encoded && gathers_ ? size_t{1} : size_t{0},    // kFinal
  };
  for (size_t role = 0; role < 4; ++role) {
    base_[role] = slots_;
    slots_ += lanes[role] * segments();
  }
  for (size_t c = 0; c < n_; ++c)  // segment 0 of a chunk is its largest
    slot_bytes_ = std::max(slot_bytes_, wire_bytes(c, 0));
}

size_t StepPlan::wire_bytes(size_t chunk, size_t seg) const {
  const size_t count = segment(chunk, seg).count;
  if (codec_ == quant::Codec::kNone) return count * elem_;
  auto n = quant::encoded_size(count, codec_, block_);
  return n ? *n : 0;  // the codec and block were validated with the request
}

std::span<std::byte> StepPlan::slot(std::byte* arena, Slot role, size_t lane, size_t chunk,
                                    size_t seg) const {
  const size_t index = base_[static_cast<size_t>(role)] + lane * segments() + seg;
  return {arena + index * slot_bytes_, wire_bytes(chunk, seg)};
}

std::vector<size_t> StepPlan::input_order() const {
  std::vector<size_t> order;
  order.reserve(n_);
  if (ring_) {
    order.push_back(ring_send_chunk(0));
    for (size_t step = 0; step < steps(); ++step) order.push_back(ring_reduce_chunk(step));
  } else {
    for (size_t i = 0; i < steps(); ++i) order.push_back(peer_at(i));
    order.push_back(rank_);
  }
  return order;
}

std::vector<size_t> StepPlan::send_only_chunks() const {
  if (ring_) return {ring_send_chunk(0)};
  std::vector<size_t> chunks;
  for (size_t i = 0; i < steps(); ++i) chunks.push_back(peer_at(i));
  return chunks;
}

}  // namespace longhaul::collective
