// What a caller asks of a gathering collective: an all-gather, and the broadcast and barrier
// built on it (a broadcast is an all-gather in which only the root contributes; a barrier is an
// all-gather of nothing, whose empty contributions still pass every hop).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "collective/schedule.hpp"
#include "collective/segment_staging.hpp"
#include "collective/signature.hpp"
#include "common/status.hpp"
#include "quant/codec.hpp"
#include "quant/dtype.hpp"
#include "transport/source_sink.hpp"

namespace longhaul::collective {

struct GatherSpec {
  // This member's contribution, counts[rank] elements. May lie at its own place in `output` (in
  // place); otherwise apart from it.
  const void* input = nullptr;
  // Every member's contribution in ring order: counts[0] elements of member 0, then member 1's...
  void* output = nullptr;
  // Elements contributed by each member, by ring position; the same on every member.
  std::vector<size_t> counts;
  // What the caller called, for the signature every member compares (signature.hpp): a broadcast
  // names its root's ring position.
  Call call = Call::kAllGather;
  uint32_t root = 0;
  // The counts the signature carries where they differ from `counts`: a member that fails its
  // part without a buffer to receive into expects nothing, yet called what the others called.
  // Null: `counts`.
  const std::vector<size_t>* signed_counts = nullptr;
  quant::DType dtype = quant::DType::kF32;
  // Codecs other than kNone need dtype f32: each contribution is encoded once, by its member, and
  // every member (that one included) ends with the decoding of those bytes.
  quant::Codec codec = quant::Codec::kNone;
  size_t block = quant::kDefaultBlock;
  Schedule schedule = Schedule::kAuto;
  // Pipeline granularity: the unencoded bytes of one segment.
  size_t segment_bytes = 1u << 20;
  // 0: none. Else the operation fails with LH_ERR_TIMEOUT on this member if it has not finished
  // this long after it started; the others fail theirs as deadline_watch.hpp says.
  std::chrono::milliseconds timeout{0};
  // Keep a copy of every segment of the output before it is overwritten, so a failed operation
  // leaves the output as it was. Off: a failed operation leaves it unspecified (no copy).
  bool restore_output = true;
  // Where the bytes of each transfer come from and go (null: host memory). Must outlive the
  // operation.
  const transport::Staging* staging = nullptr;
  // Where this member's contribution arrives from and the output goes, segment by segment,
  // overlapped with the network (segment_staging.hpp): `input` and `output` are then the buffer
  // the copies fill and empty. Null: the contribution is all there, and the output stays.
  std::shared_ptr<SegmentStaging> segment_staging;
  // Runs once the operation has succeeded, after the result is in `output` and before any waiter
  // wakes: moves it on to where the caller wants it (device memory: gpu/staged_collectives.hpp).
  // An error fails the operation. Empty: nothing to do.
  std::function<Status()> land_output;

  size_t total() const {
    size_t t = 0;
    for (size_t c : counts) t += c;
    return t;
  }
};

}  // namespace longhaul::collective
