#include "collective/request.hpp"

#include <fmt/format.h>

#include "collective/tag.hpp"
#include "quant/reduce.hpp"

namespace longhaul::collective {

// Below this many bytes in all, a gathering operation is bound by latency, not bandwidth.
constexpr size_t kLatencyBoundBytes = 64 << 10;

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

namespace {

bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// A reduce-scatter's chunks and its output: the counts name every member's chunk, and the output
// (this member's chunk) is apart from the input.
Status validate_scatter(const AllReduceSpec& spec, const RingView& view) {
  size_t own = spec.count / std::max<size_t>(view.size, 1);
  if (!spec.chunk_counts.empty()) {
    if (spec.chunk_counts.size() != view.size)
      return invalid_argument(fmt::format("reduce-scatter: {} counts for a group of {}",
                                          spec.chunk_counts.size(), view.size));
    size_t sum = 0;
    for (size_t c : spec.chunk_counts) sum += c;
    if (sum != spec.count)
      return invalid_argument(
          fmt::format("reduce-scatter: the counts sum to {}, the input has {}", sum, spec.count));
    own = spec.chunk_counts[view.rank];
  }
  const size_t elem = quant::element_size(spec.dtype);
  if (overlap(spec.input, spec.count * elem, spec.scatter_output, own * elem))
    return invalid_argument("reduce-scatter input and output overlap");
  return Status::ok();
}

// How the segments travel: the codec fits the type, the segment holds an element, and the group
// fits the tags.
Status validate_wire(quant::DType dtype, quant::Codec codec, size_t block, size_t segment_bytes,
                     const RingView& view) {
  if (codec != quant::Codec::kNone && dtype != quant::DType::kF32)
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("codec {} needs f32 data, got {}", quant::codec_name(codec),
                              quant::dtype_name(dtype)));
  if (auto enc = quant::encoded_size(1, codec, block); !enc) return enc.status();
  if (view.size > kMaxRingSteps + 1)
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("groups of more than {} members", kMaxRingSteps + 1));
  if (segment_bytes < quant::element_size(dtype))
    return invalid_argument("segment_bytes is smaller than one element");
  return Status::ok();
}

}  // namespace

Status validate(const AllReduceSpec& spec, const RingView& view) {
  if (Status s = quant::check_supported(spec.dtype, spec.op); !s) return s;
  if (view.size == 0 || view.rank >= view.size) return invalid_argument("invalid ring view");
  if (spec.count > 0 && (!spec.input || (!spec.output && !spec.reduce_scatter())))
    return invalid_argument("all-reduce buffers must not be null");
  const size_t elem = quant::element_size(spec.dtype);
  const size_t bytes = spec.count * elem;
  if (spec.reduce_scatter()) {
    if (Status s = validate_scatter(spec, view); !s) return s;
  } else if (spec.input != spec.output && overlap(spec.input, bytes, spec.output, bytes)) {
    return invalid_argument("all-reduce input and output overlap partially");
  } else if (!spec.chunk_counts.empty()) {
    return invalid_argument("chunk counts serve a reduce-scatter");
  }
  if (spec.residual && spec.codec == quant::Codec::kNone)
    return invalid_argument("an error-feedback residual needs a quantizing codec");
  return validate_wire(spec.dtype, spec.codec, spec.block, spec.segment_bytes, view);
}

Status validate(const GatherSpec& spec, const RingView& view) {
  if (view.size == 0 || view.rank >= view.size) return invalid_argument("invalid ring view");
  if (Status s = quant::check_supported(spec.dtype, quant::ReduceOp::kSum); !s) return s;
  if (spec.counts.size() != view.size)
    return invalid_argument(
        fmt::format("all-gather: {} counts for a group of {}", spec.counts.size(), view.size));
  const size_t elem = quant::element_size(spec.dtype);
  const size_t own = spec.counts[view.rank], total = spec.total();
  if ((own > 0 && !spec.input) || (total > 0 && !spec.output))
    return invalid_argument("all-gather buffers must not be null");
  size_t place = 0;  // this member's contribution's place in the output, in elements
  for (size_t r = 0; r < view.rank; ++r) place += spec.counts[r];
  const auto* in_place = static_cast<const std::byte*>(spec.output) + place * elem;
  if (spec.input != in_place && overlap(spec.input, own * elem, spec.output, total * elem))
    return invalid_argument("all-gather input overlaps the output other than at its own place");
  return validate_wire(spec.dtype, spec.codec, spec.block, spec.segment_bytes, view);
}

Schedule choose_schedule(const GatherSpec& spec, const RingView& view) {
  if (spec.schedule != Schedule::kAuto) return spec.schedule;
  if (!view.full_mesh || view.size > 16) return Schedule::kRing;
  // Direct sends each contribution N-1 times from its owner: as many bytes per member as the ring
  // when contributions are alike, and one round trip instead of N-1 steps. A lone large
  // contribution (a broadcast) would leave its owner sending N-1 copies: the ring shares that.
  size_t largest = 0;
  for (size_t c : spec.counts) largest = std::max(largest, c);
  const size_t elem = quant::element_size(spec.dtype);
  const bool small = spec.total() * elem <= kLatencyBoundBytes;
  return small || largest * (view.size - 1) <= spec.total() ? Schedule::kDirect : Schedule::kRing;
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
