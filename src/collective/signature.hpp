// A collective's signature: what a member called, in the fields every member must agree on
// (docs/collectives.md, "Calls that disagree"). An operation sends its signature to every member it
// exchanges data with before any of its data, and posts none of its receives until each of those
// members' signatures has arrived and equals its own. A difference fails the operation with
// LH_ERR_MISMATCH naming the field and both members, before anything reaches its output; the
// failure travels on with the operation's cancel (transport::DataLink::cancel_matching), so every
// member fails with the same reason, the members that had not called it yet included.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collective/schedule.hpp"
#include "common/status.hpp"

namespace longhaul::collective {

// What the caller asked for: all-gather, broadcast and barrier run one operation (gather.hpp),
// but a broadcast answered by an all-gather is still two different calls.
enum class Call : uint8_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kBroadcast = 4,
  kBarrier = 5,
};
const char* call_name(Call call);

struct Signature {
  Call call = Call::kAllReduce;
  uint8_t dtype = 0;                    // quant::DType
  uint8_t op = 0;                       // quant::ReduceOp (0 where the call reduces nothing)
  uint8_t codec = 0;                    // quant::Codec
  Schedule schedule = Schedule::kRing;  // the one chosen (kAuto resolves alike on every member)
  uint32_t block = 0;                   // elements per quantization block (0 without a codec)
  uint32_t root = 0;                    // a broadcast's root ring position (0 otherwise)
  uint64_t count = 0;                   // elements in all
  // Each member's share of `count` (an all-gather's contributions, a reduce-scatter's chunks),
  // hashed (layout_hash); 0 where the call has none.
  uint64_t layout = 0;

  static constexpr size_t kBytes = 32;
  using Encoded = std::array<std::byte, kBytes>;
  Encoded encode() const;  // the wire codec's little endian, the field order above
  // Any 32 bytes decode; a field outside its enumeration is simply a different value.
  static Signature decode(std::span<const std::byte, kBytes> bytes);
};

// XXH3 of the counts as u64s, for Signature::layout.
uint64_t layout_hash(const std::vector<size_t>& counts);

// The first field in which `theirs` differs from `mine`, as "<field>: <mine> at <me>, <theirs>
// at <them>" for people (every member reads the same words); nullopt when the two agree.
std::optional<std::string> describe_difference(const Signature& mine, const Signature& theirs,
                                               const std::string& me, const std::string& them);

}  // namespace longhaul::collective
