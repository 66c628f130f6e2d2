#include "collective/signature.hpp"

#include <fmt/format.h>

#include "quant/codec.hpp"
#include "quant/dtype.hpp"

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

void put(std::byte*& at, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) *at++ = static_cast<std::byte>(value >> (8 * i));
}

uint64_t get(const std::byte*& at, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= uint64_t{std::to_integer<uint8_t>(*at++)} << (8 * i);
  return value;
}

// A field's value as people read it; a value outside the enumeration as its number.
template <typename Enum, typename Name>
std::string named(uint8_t value, int known, Name name) {
  if (value >= known) return fmt::format("{}", value);
  return std::string(name(static_cast<Enum>(value)));
}

}  // namespace

Signature::Encoded Signature::encode() const {
  Encoded out{};
  std::byte* at = out.data();
  put(at, static_cast<uint8_t>(call), 1);
  put(at, dtype, 1);
  put(at, op, 1);
  put(at, codec, 1);
  put(at, static_cast<uint8_t>(schedule), 1);
  put(at, 0, 3);  // reserved
  put(at, block, 4);
  put(at, root, 4);
  put(at, count, 8);
  put(at, layout, 8);
  return out;
}

Signature Signature::decode(std::span<const std::byte, kBytes> bytes) {
  Signature s;
  const std::byte* at = bytes.data();
  s.call = static_cast<Call>(get(at, 1));
  s.dtype = static_cast<uint8_t>(get(at, 1));
  s.op = static_cast<uint8_t>(get(at, 1));
  s.codec = static_cast<uint8_t>(get(at, 1));
  s.schedule = static_cast<Schedule>(get(at, 1));
  (void)get(at, 3);
  s.block = static_cast<uint32_t>(get(at, 4));
  s.root = static_cast<uint32_t>(get(at, 4));
  s.count = get(at, 8);
  s.layout = get(at, 8);
  return s;
}

uint64_t layout_hash(const std::vector<size_t>& counts) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t c : counts)
    for (size_t i = 0; i < 8; ++i) {
      h ^= (static_cast<uint64_t>(c) >> (8 * i)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  return h;
}

std::optional<std::string> describe_difference(const Signature& mine, const Signature& theirs,
                                               const std::string& me, const std::string& them) {
  auto differs = [&](const char* field, const std::string& a, const std::string& b) {
    return fmt::format("{}: {} at {}, {} at {}", field, a, me, b, them);
  };
  if (mine.call != theirs.call)
    return differs(
        "the call", call_name(mine.call),
        named<Call>(static_cast<uint8_t>(theirs.call), 6, [](Call c) { return call_name(c); }));
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
    return differs("the schedule", schedule_name(mine.schedule),
                   named<Schedule>(static_cast<uint8_t>(theirs.schedule), 3, schedule_name));
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
