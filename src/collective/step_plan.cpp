#include "collective/step_plan.hpp"

#include <algorithm>

namespace longhaul::collective {

StepPlan::StepPlan(Schedule schedule, size_t members, size_t rank, const AllReduceSpec& spec)
    : n_(members),
      rank_(rank),
      elem_(quant::element_size(spec.dtype)),
      codec_(spec.codec),
      block_(spec.block),
      part_(spec.count, members, std::max<size_t>(1, spec.segment_bytes / elem_)) {
  if (n_ < 2 || spec.count == 0) return;  // nothing travels
  const bool encoded = codec_ != quant::Codec::kNone;
  const bool ring = schedule == Schedule::kRing;
  const size_t lanes[4] = {
      ring ? std::min<size_t>(2, steps()) : steps(),  // kReduceIn
      encoded ? steps() : 0,                          // kGatherIn
      encoded ? steps() : 0,                          // kOut
      encoded ? size_t{1} : size_t{0},                // kFinal
  };
  for (size_t role = 0; role < 4; ++role) {
    base_[role] = slots_;
    slots_ += lanes[role] * segments();
  }
  slot_bytes_ = wire_bytes(0, 0);  // chunk 0's segment 0 is the largest
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

}  // namespace longhaul::collective
