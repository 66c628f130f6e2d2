// The tag of one transfer of a collective: which operation (epoch, sequence number), which phase
// and step of its schedule, which segment. Every member computes the same tags because every
// member issues the group's collectives in the same order within an epoch, and the sequence
// numbers restart with each epoch.
//
// On the link (transport::Tag, 64 bits): the epoch field (16 bits, 1 + epoch mod 65535, never 0),
// the sequence number (20 bits), the phase (1), the step (8) and the segment (19). The nonzero
// epoch field keeps every collective's tag at or above 2^48, clear of the small ids the state
// fetcher counts up from 1 on the same links.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/data_link.hpp"

namespace longhaul::collective {

enum class Phase : uint8_t { kReduceScatter = 0, kAllGather = 1 };

// The widths of the step and segment fields.
inline constexpr size_t kMaxRingSteps = 255;
inline constexpr size_t kMaxSegments = size_t{1} << 19;

struct Tag {
  uint64_t epoch = 0;
  uint64_t seq = 0;
  Phase phase = Phase::kReduceScatter;
  size_t step = 0;
  size_t segment = 0;

  // The bits of a packed tag that name the operation (epoch field and sequence number): cancelling
  // operation_bits() under this mask ends every transfer of the operation at once.
  static constexpr transport::Tag kOperationMask = ~((transport::Tag{1} << 28) - 1);

  constexpr transport::Tag bits() const {
    return ((epoch % 0xFFFF + 1) << 48) | ((seq & 0xFFFFF) << 28) |
           (static_cast<transport::Tag>(phase) << 27) |
           ((static_cast<transport::Tag>(step) & 0xFF) << 19) |
           (static_cast<transport::Tag>(segment) & 0x7FFFF);
  }
  constexpr transport::Tag operation_bits() const { return bits() & kOperationMask; }

  // The schedule's coordinates of a packed tag (phase, step, segment); the epoch and sequence
  // fields come back as they are packed (1 + epoch mod 65535, seq mod 2^20).
  static constexpr Tag unpack(transport::Tag bits) {
    Tag t;
    t.epoch = bits >> 48;
    t.seq = (bits >> 28) & 0xFFFFF;
    t.phase = static_cast<Phase>((bits >> 27) & 1);
    t.step = (bits >> 19) & 0xFF;
    t.segment = bits & 0x7FFFF;
    return t;
  }
};

}  // namespace longhaul::collective
