// Encoded: segments travel quantized by a blockwise codec (f32 data). The output holds the f32
// working values; what travels is encoded into scratch slots. A sender encodes its own values
// once (with error feedback when the caller keeps a residual), a receiver decodes and accumulates
// in f32, and the owner encodes the final segment once: every member, the owner included, ends
// with the decoding of those bytes, forwarded unchanged around the group.
#include "collective/wire_format.hpp"
#include "quant/codec.hpp"
#include "quant/reduce.hpp"

namespace longhaul::collective {
namespace {

using Slot = StepPlan::Slot;

class EncodedFormat final : public WireFormat {
 public:
  using WireFormat::WireFormat;

  std::span<const std::byte> contribution(size_t chunk, size_t seg, size_t lane) override {
    if (auto ahead = encoded_ahead(chunk, seg); !ahead.empty()) return ahead;
    guard_.touch_segment(chunk, seg);
    const auto out = slot(Slot::kOut, lane, chunk, seg);
    const Range range = plan_.segment(chunk, seg);
    if (spec_.residual)
      check(quant::encode_with_error_feedback(work_f32(chunk, seg),
                                              {spec_.residual + range.begin, range.count}, out,
                                              spec_.codec, spec_.block));
    else
      check(quant::encode(work_f32(chunk, seg), out, spec_.codec, spec_.block));
    return out;
  }

  void reduce(size_t chunk, size_t seg, std::span<const std::byte* const> incoming, bool) override {
    guard_.touch_segment(chunk, seg);
    const size_t bytes = plan_.wire_bytes(chunk, seg);
    for (const std::byte* in : incoming)
      check(quant::decode_accumulate({in, bytes}, work_f32(chunk, seg), spec_.codec, spec_.block));
  }

  std::span<const std::byte> partial(size_t chunk, size_t seg, size_t lane) override {
    const auto out = slot(Slot::kOut, lane, chunk, seg);
    check(quant::encode(work_f32(chunk, seg), out, spec_.codec, spec_.block));
    return out;
  }

  // Average, encode once, and adopt those bytes here too.
  std::span<const std::byte> finish(size_t chunk, size_t seg) override {
    const auto final_bytes = slot(Slot::kFinal, 0, chunk, seg);
    const Range range = plan_.segment(chunk, seg);
    if (spec_.op == quant::ReduceOp::kAvg && range.count > 0)
      check(quant::finalize_avg(work(chunk, seg), range.count, spec_.dtype, plan_.members()));
    check(quant::encode(work_f32(chunk, seg), final_bytes, spec_.codec, spec_.block));
    check(quant::decode(final_bytes, work_f32(chunk, seg), spec_.codec, spec_.block));
    return final_bytes;
  }

  std::span<std::byte> landing(size_t chunk, size_t seg, size_t lane) override {
    return slot(Slot::kGatherIn, lane, chunk, seg);
  }
  bool lands_in_output() const override { return false; }

  void keep(size_t chunk, size_t seg) override {
    const Range range = plan_.segment(chunk, seg);
    if (spec_.op == quant::ReduceOp::kAvg && range.count > 0)
      check(quant::finalize_avg(work(chunk, seg), range.count, spec_.dtype, plan_.members()));
  }

  void adopt(size_t chunk, size_t seg, size_t lane) override {
    guard_.touch_segment(chunk, seg);
    check(quant::decode(landing(chunk, seg, lane), work_f32(chunk, seg), spec_.codec, spec_.block));
  }

 private:
  // The contribution the staging encoded where the input lives (segment_staging.hpp), if it did.
  std::span<const std::byte> encoded_ahead(size_t chunk, size_t seg) {
    auto bytes =
        encoded_input(spec_.segment_staging.get(), chunk, seg, plan_.wire_bytes(chunk, seg));
    if (!bytes) check(bytes.status());
    return bytes ? *bytes : std::span<const std::byte>{};
  }
};

}  // namespace

std::unique_ptr<WireFormat> make_encoded_format(const AllReduceSpec& spec, const StepPlan& plan,
                                                InputGuard& guard, WireFormat::FailureSink fail) {
  return std::make_unique<EncodedFormat>(spec, plan, guard, std::move(fail));
}

}  // namespace longhaul::collective
