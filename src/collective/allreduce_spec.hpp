// What a caller asks of an all-reduce, and what it reports back.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collective/schedule.hpp"
#include "collective/segment_staging.hpp"
#include "quant/codec.hpp"
#include "quant/dtype.hpp"
#include "transport/source_sink.hpp"

namespace longhaul::collective {

// An all-reduce's schedules (schedule.hpp): ring, reduce-scatter in N-1 ring steps, then
// all-gather in N-1 ring steps (ring.hpp); direct, each member sends each chunk straight to its
// owner, who sends the result to everyone (direct.hpp).

struct AllReduceSpec {
  const void* input = nullptr;  // count elements of dtype; may equal output (in place)
  void* output = nullptr;
  size_t count = 0;
  quant::DType dtype = quant::DType::kF32;
  quant::ReduceOp op = quant::ReduceOp::kSum;
  // Codecs other than kNone need dtype f32.
  quant::Codec codec = quant::Codec::kNone;
  size_t block = quant::kDefaultBlock;
  // Error feedback (codec != kNone): `count` floats carried from call to call; may be null.
  float* residual = nullptr;
  Schedule schedule = Schedule::kAuto;
  // Pipeline granularity: the unencoded bytes of one segment.
  size_t segment_bytes = 1u << 20;
  // 0: none. Else the operation fails with LH_ERR_TIMEOUT on this member if it has not finished
  // this long after it started; the others fail theirs as deadline_watch.hpp says.
  std::chrono::milliseconds timeout{0};
  // In place only: keep a copy of every segment before overwriting it, so a failed operation
  // gives the caller its input back. Costs one streaming copy of the buffer per operation and as
  // much pooled scratch; a caller that never retries with the same input can waive it (the
  // buffer then holds unspecified values after a failure, as with gloo or NCCL).
  bool restore_input = true;
  // Where the bytes of each transfer come from and go (null: host memory, ready at once). Must
  // outlive the operation.
  const transport::Staging* staging = nullptr;
  // Where the input arrives from and the result goes, segment by segment, overlapped with the
  // network (segment_staging.hpp): `input` and `output` are then the buffer the copies fill and
  // empty. Null: the input is all there, and the result stays where the operation leaves it.
  std::shared_ptr<SegmentStaging> segment_staging;
  // A reduce-scatter instead of an all-reduce when set: no all-gather phase, and this member's
  // reduced chunk (chunk_counts[rank] elements; the chunk of ring position r goes to the member
  // at ring position r) is copied here once the operation has succeeded, never before; `output`
  // is unused. Quantized, the chunk is the f32 sum of the decoded contributions (not encoded
  // again: nobody else receives it).
  void* scatter_output = nullptr;
  // Elements of each member's chunk, by ring position; they sum to count. Empty: count split
  // evenly (chunk sizes differ by at most one element).
  std::vector<size_t> chunk_counts;

  // Runs once the operation has succeeded, after the result is in `output` and before any waiter
  // wakes: moves it on to where the caller wants it (the GPU layer copies a pinned host slot to
  // device memory, gpu/staged_collectives.hpp). An error fails the operation. Empty: nothing to do.
  std::function<Status()> land_output;

  bool reduce_scatter() const { return scatter_output != nullptr; }
};

using AllReduceInfo = OpInfo;

}  // namespace longhaul::collective
