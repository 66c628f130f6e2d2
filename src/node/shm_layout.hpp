// The layout of a local group's shared segment (shm_local_group.hpp), private to its two files.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "node/shm_local_group.hpp"

namespace longhaul::node {

inline constexpr uint64_t kSegmentReady = 0x6c68'6c6f'6361'6c31;  // "lhlocal1"
inline constexpr size_t kPieceAlign = 64;
inline constexpr size_t kPage = 4096;

constexpr size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// One rank's outcome, for agree().
struct SharedOutcome {
  int32_t code;
  char message[252];
};

// The segment's first page(s); one slot per rank follows, each page-aligned.
struct ShmHeader {
  std::atomic<uint64_t> ready;  // kSegmentReady once the creator has written the fields below
  uint32_t size;
  uint32_t creator_pid;
  uint64_t slot_bytes;
  std::atomic<int32_t> member_pids[ShmLocalGroup::kMaxLocalRanks];  // 0: not joined yet
  SharedBarrierWords barrier;
  SharedOutcome outcomes[ShmLocalGroup::kMaxLocalRanks];
};

inline constexpr size_t kHeaderBytes = round_up(sizeof(ShmHeader), kPage);

}  // namespace longhaul::node
