#include "collective/signature.hpp"

#include <algorithm>
#include <array>
#include <cassert>

#include <fmt/format.h>
#include <xxhash.h>

#include "quant/codec.hpp"
#include "quant/dtype.hpp"
#include "wire/codec.hpp"

namespace longhaul::collective {

const char* call_name(Call call) {
  switch (call) {
    case Call::kAllReduce:
      return "allreduce";
    case Call::kReduceScatter:
      return "reduce_scatter";
    case Call::kAllGather:
      return "allgather";
    case Call::kBroadcast:
      return "broadcast";
    case Call::kBarrier:
      return "barrier";
  }
  return "unknown";
}

namespace {

// A field's value as people read it; a value outside the enumeration (`end` and above) as its
// number.
template <typename Enum, typename Name>
std::string named(uint8_t value, int end, Name name) {
  if (value >= end) return fmt::format("{}", value);
  return std::string(name(static_cast<Enum>(value)));
}
constexpr int kCallEnd = static_cast<int>(Call::kBarrier) + 1;
constexpr int kScheduleEnd = static_cast<int>(Schedule::kDirect) + 1;

}  // namespace

Signature::Encoded Signature::encode() const {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(call));
  w.u8(dtype);
  w.u8(op);
  w.u8(codec);
  w.u8(static_cast<uint8_t>(schedule));
  w.raw(std::array<std::byte, 3>{});  // reserved
  w.u32(block);
  w.u32(root);
  w.u64(count);
  w.u64(layout);
  Encoded out;
  assert(w.buffer().size() == kBytes);
  std::copy(w.buffer().begin(), w.buffer().end(), out.begin());
  return out;
}

Signature Signature::decode(std::span<const std::byte, kBytes> bytes) {
  wire::Reader r(bytes);
  Signature s;
  uint8_t call = 0, schedule = 0;
  std::array<std::byte, 3> reserved{};
  // kBytes hold every field: no read can fail.
  [[maybe_unused]] const bool read = r.u8(&call).is_ok() && r.u8(&s.dtype).is_ok() &&
                                     r.u8(&s.op).is_ok() && r.u8(&s.codec).is_ok() &&
                                     r.u8(&schedule).is_ok() && r.raw(reserved).is_ok() &&
                                     r.u32(&s.block).is_ok() && r.u32(&s.root).is_ok() &&
                                     r.u64(&s.count).is_ok() && r.u64(&s.layout).is_ok();
  assert(read);
  s.call = static_cast<Call>(call);
  s.schedule = static_cast<Schedule>(schedule);
  return s;
}

uint64_t layout_hash(const std::vector<size_t>& counts) {
  std::vector<uint64_t> wide(counts.begin(), counts.end());  // the same bytes on every platform
  return XXH3_64bits(wide.data(), wide.size() * sizeof(uint64_t));
}

std::optional<std::string> describe_difference(const Signature& mine, const Signature& theirs,
                                               const std::string& me, const std::string& them) {
  auto differs = [&](const char* field, const std::string& a, const std::string& b) {
    return fmt::format("{}: {} at {}, {} at {}", field, a, me, b, them);
  };
  if (mine.call != theirs.call)
    return differs("the call", call_name(mine.call),
                   named<Call>(static_cast<uint8_t>(theirs.call), kCallEnd,
                               [](Call c) { return call_name(c); }));
  if (mine.dtype != theirs.dtype)
    return differs("the dtype",
                   named<quant::DType>(mine.dtype, quant::kNumDTypes, quant::dtype_name),
                   named<quant::DType>(theirs.dtype, quant::kNumDTypes, quant::dtype_name));
  if (mine.op != theirs.op)
    return differs("the reduce op",
                   named<quant::ReduceOp>(mine.op, quant::kNumReduceOps, quant::reduce_op_name),
                   named<quant::ReduceOp>(theirs.op, quant::kNumReduceOps, quant::reduce_op_name));
  if (mine.codec != theirs.codec)
    return differs("the codec",
                   named<quant::Codec>(mine.codec, quant::kNumCodecs, quant::codec_name),
                   named<quant::Codec>(theirs.codec, quant::kNumCodecs, quant::codec_name));
  if (mine.block != theirs.block)
    return differs("the codec's block", fmt::format("{}", mine.block),
                   fmt::format("{}", theirs.block));
  if (mine.schedule != theirs.schedule)
    return differs(
        "the schedule", schedule_name(mine.schedule),
        named<Schedule>(static_cast<uint8_t>(theirs.schedule), kScheduleEnd, schedule_name));
  if (mine.root != theirs.root)
    return differs("the root", fmt::format("ring position {}", mine.root),
                   fmt::format("ring position {}", theirs.root));
  if (mine.count != theirs.count)
    return differs("the count", fmt::format("{} elements", mine.count),
                   fmt::format("{} elements", theirs.count));
  if (mine.layout != theirs.layout) return differs("the per-member counts", "one split", "another");
  return std::nullopt;
}

}  // namespace longhaul::collective
