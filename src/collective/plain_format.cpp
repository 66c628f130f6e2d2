// Plain: segments travel in the data type itself. The output is the working buffer: this
// member's values and partial sums are sent straight from it, arriving values are combined into
// it, and the owner's final bytes land in it.
#include <algorithm>
#include <array>

#include "collective/tag.hpp"
#include "collective/wire_format.hpp"
#include "quant/reduce.hpp"

namespace longhaul::collective {
namespace {

// The unit of the fused first-touch / combine / average pass: two operands of it fit in L1.
constexpr size_t kPieceBytes = 16 << 10;

class PlainFormat final : public WireFormat {
 public:
  using WireFormat::WireFormat;

  std::span<const std::byte> contribution(size_t chunk, size_t seg, size_t) override {
    guard_.touch_segment(chunk, seg);
    return work_span(chunk, seg);
  }
  void reduce(size_t chunk, size_t seg, std::span<const std::byte* const> incoming,
              bool finish) override;
  std::span<const std::byte> partial(size_t chunk, size_t seg, size_t) override {
    return work_span(chunk, seg);
  }
  // Averaged by the last reduce already.
  std::span<const std::byte> finish(size_t chunk, size_t seg) override {
    return work_span(chunk, seg);
  }
  std::span<std::byte> landing(size_t chunk, size_t seg, size_t) override {
    return work_span(chunk, seg);
  }
  bool lands_in_output() const override { return true; }
  void adopt(size_t, size_t, size_t) override {}
  // Averaged by the last reduce already.
  void keep(size_t, size_t) override {}

 private:
  // Half-precision sums are carried in f32 and rounded once per combine, not once per
  // contribution: the direct schedule's owner adds N values, and an average divides before it
  // rounds. (The ring still rounds at every hop: its partial sums travel in the wire type.)
  bool widens() const {
    return (spec_.dtype == quant::DType::kF16 || spec_.dtype == quant::DType::kBF16) &&
           (spec_.op == quant::ReduceOp::kSum || spec_.op == quant::ReduceOp::kAvg);
  }
};

void PlainFormat::reduce(size_t chunk, size_t seg, std::span<const std::byte* const> incoming,
                         bool finish) {
  const bool first_touch = guard_.claim(chunk, seg);
  const Range range = plan_.segment(chunk, seg);
  const size_t elem = plan_.element_size();
  const bool average = finish && spec_.op == quant::ReduceOp::kAvg;
  const bool widen = widens();
  // Piece by piece, small enough to stay in the L1 cache: keep the original, combine every
  // contribution in order, average; one pass over memory instead of one per step. Every kernel
  // is element-wise, so the result is the same bits as whole-segment calls.
  const size_t piece = std::max<size_t>(1, kPieceBytes / elem);
  // On the stack: a group has at most kMaxRingSteps other members, so no allocation per segment.
  std::array<const void*, kMaxRingSteps> sources;
  for (size_t done = 0; done < range.count; done += piece) {
    const size_t k = std::min(piece, range.count - done);
    std::byte* dst = work(chunk, seg) + done * elem;
    if (first_touch) guard_.touch(range.begin + done, k);
    if (widen) {
      for (size_t j = 0; j < incoming.size(); ++j) sources[j] = incoming[j] + done * elem;
      check(quant::sum_widened(dst, std::span(sources.data(), incoming.size()), k, spec_.dtype,
                               average ? plan_.members() : 1));
      continue;
    }
    for (const std::byte* in : incoming)
      check(quant::reduce_into(dst, in + done * elem, k, spec_.dtype, spec_.op));
    if (average) check(quant::finalize_avg(dst, k, spec_.dtype, plan_.members()));
  }
}

}  // namespace

std::unique_ptr<WireFormat> make_plain_format(const AllReduceSpec& spec, const StepPlan& plan,
                                              InputGuard& guard, WireFormat::FailureSink fail) {
  return std::make_unique<PlainFormat>(spec, plan, guard, std::move(fail));
}

std::unique_ptr<WireFormat> make_wire_format(const AllReduceSpec& spec, const StepPlan& plan,
                                             InputGuard& guard, WireFormat::FailureSink fail) {
  return spec.codec == quant::Codec::kNone
             ? make_plain_format(spec, plan, guard, std::move(fail))
             : make_encoded_format(spec, plan, guard, std::move(fail));
}

}  // namespace longhaul::collective
