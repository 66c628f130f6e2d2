#include "collective/request.hpp"

#include <fmt/format.h>

#include "collective/tag.hpp"
#include "quant/reduce.hpp"

namespace longhaul::collective {

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kAuto:
      return "auto";
    case Schedule::kRing:
      return "ring";
    case Schedule::kDirect:
      return "direct";
  }
  return "?";
}

Status validate(const AllReduceSpec& spec, const RingView& view) {
  if (Status s = quant::check_supported(spec.dtype, spec.op); !s) return s;
  if (spec.count > 0 && (!spec.input || !spec.output))
    return invalid_argument("all-reduce buffers must not be null");
  const size_t elem = quant::element_size(spec.dtype);
  const auto* in = static_cast<const std::byte*>(spec.input);
  const auto* out = static_cast<const std::byte*>(spec.output);
  const size_t bytes = spec.count * elem;
  if (in != out && in < out + bytes && out < in + bytes)
    return invalid_argument("all-reduce input and output overlap partially");
  if (spec.codec != quant::Codec::kNone && spec.dtype != quant::DType::kF32)
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("codec {} needs f32 data, got {}", quant::codec_name(spec.codec),
                              quant::dtype_name(spec.dtype)));
  if (spec.residual && spec.codec == quant::Codec::kNone)
    return invalid_argument("an error-feedback residual needs a quantizing codec");
  if (auto enc = quant::encoded_size(1, spec.codec, spec.block); !enc) return enc.status();
  if (view.size == 0 || view.rank >= view.size) return invalid_argument("invalid ring view");
  if (view.size > kMaxRingSteps + 1)
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("groups of more than {} members", kMaxRingSteps + 1));
  if (spec.segment_bytes < elem)
    return invalid_argument("segment_bytes is smaller than one element");
  return Status::ok();
}

Schedule choose_schedule(const AllReduceSpec& spec, const RingView& view) {
  if (spec.schedule != Schedule::kAuto) return spec.schedule;
  // Quantized, the direct schedule encodes each contribution once instead of at every ring hop;
  // beyond 16 members its N-1 connections per member cost more than that saves.
  return spec.codec != quant::Codec::kNone && view.full_mesh && view.size <= 16 ? Schedule::kDirect
                                                                                : Schedule::kRing;
}

Status check_links(Schedule schedule, const RingView& view) {
  if (view.size <= 1) return Status::ok();
  if (schedule == Schedule::kRing) {
    if (view.links.size() != view.size || !view.links[view.left()] || !view.links[view.right()])
      return peer_lost("no link to a ring neighbour");
    return Status::ok();
  }
  if (view.has_links_to_all()) return Status::ok();
  if (view.full_mesh) return peer_lost("no link to a member of the group");
  return Status(LH_ERR_UNSUPPORTED,
                "the direct schedule needs links to every member of the group (the "
                "communicator's full_mesh)");
}

}  // namespace longhaul::collective
