#include "collective/gather_format.hpp"

#include <cstring>

#include "quant/codec.hpp"

namespace longhaul::collective {
namespace {

// Plain: a contribution travels as it is, from the output (where its owner copied it) into the
// output (where it lands).
class PlainGather final : public GatherFormat {
 public:
  using GatherFormat::GatherFormat;

  std::span<const std::byte> own(size_t seg) override {
    const size_t chunk = plan_.rank(), bytes = plan_.bytes(chunk, seg);
    guard_.touch_segment(chunk, seg);
    if (in(seg) != out(chunk, seg) && bytes > 0) std::memcpy(out(chunk, seg), in(seg), bytes);
    return {out(chunk, seg), bytes};
  }
  std::span<std::byte> landing(size_t chunk, size_t seg) override {
    return {out(chunk, seg), plan_.bytes(chunk, seg)};
  }
  bool lands_in_output() const override { return true; }
  void adopt(size_t, size_t) override {}
};

// Encoded: the owner encodes its contribution once into its slot and adopts the decoding; the
// others land the same bytes in their slot of that chunk and decode them.
class EncodedGather final : public GatherFormat {
 public:
  using GatherFormat::GatherFormat;

  std::span<const std::byte> own(size_t seg) override {
    const size_t chunk = plan_.rank();
    const size_t count = plan_.segment(chunk, seg).count;
    const auto bytes = slot(chunk, seg);
    if (count == 0) return bytes;
    // Read the input before the output is touched: in place they are the same bytes.
    auto ahead = encoded_input(spec_.segment_staging.get(), chunk, seg, bytes.size());
    if (!ahead)
      check(ahead.status());
    else if (!ahead->empty())  // encoded where the input lives (segment_staging.hpp)
      std::memcpy(bytes.data(), ahead->data(), bytes.size());
    else
      check(quant::encode({reinterpret_cast<const float*>(in(seg)), count}, bytes, spec_.codec,
                          spec_.block));
    adopt(chunk, seg);
    return bytes;
  }
  std::span<std::byte> landing(size_t chunk, size_t seg) override { return slot(chunk, seg); }
  bool lands_in_output() const override { return false; }
  void adopt(size_t chunk, size_t seg) override {
    const size_t count = plan_.segment(chunk, seg).count;
    guard_.touch_segment(chunk, seg);
    if (count == 0) return;
    check(quant::decode(slot(chunk, seg), {reinterpret_cast<float*>(out(chunk, seg)), count},
                        spec_.codec, spec_.block));
  }
};

}  // namespace

std::unique_ptr<GatherFormat> make_gather_format(const GatherSpec& spec, const GatherPlan& plan,
                                                 InputGuard& guard,
                                                 GatherFormat::FailureSink fail) {
  if (spec.codec == quant::Codec::kNone)
    return std::make_unique<PlainGather>(spec, plan, guard, std::move(fail));
  return std::make_unique<EncodedGather>(spec, plan, guard, std::move(fail));
}

}  // namespace longhaul::collective
