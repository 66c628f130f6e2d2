// Where an all-reduce's input comes from and where its result goes, segment by segment, when the
// caller's buffers are not the host memory the operation runs on: the GPU layer's staging pipeline
// (gpu/staging_pipeline.hpp) copies a device input into a pinned host slot while the first
// segments are already on the wire, and copies final segments back while the rest still travel.
//
// The operation works on the slot as on any host buffer. It reads an input segment only once
// when_input_ready() has said it is there, and says when a segment of its result is final, so the
// copies overlap the network instead of preceding and following it.
//
// The operation counts every copy the staging starts for it (begin's, result_final's) as one of
// its tasks: it does not complete, successful or not, while a copy still touches its buffers or
// the caller's, and it never blocks a thread to wait for one (a copy's completion may run where
// blocking would stall every later copy: a CUDA stream's host function).
//
// Threads: every call is thread-safe; callbacks run on whatever thread completed the copy, and
// must not block.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "collective/partition.hpp"
#include "common/status.hpp"

namespace longhaul::collective {

class SegmentStaging {
 public:
  using Ready = std::function<void(Status)>;
  // Called before each copy begin() or result_final() starts; returns what to call, exactly once
  // and on any thread, once that copy has ended: OK once it arrived, otherwise why not (the
  // operation then fails at once, whether or not anything waits for that segment).
  using CopyEnded = std::function<void(Status)>;
  using CopyStarted = std::function<CopyEnded()>;
  virtual ~SegmentStaging() = default;

  // The operation's buffer is cut by `part`; `chunk_order` lists every chunk in the order the
  // schedule first reads it, so copies start with the segments needed first. Called once, when
  // the schedule starts; the input's copies start here.
  virtual void begin(const Partition& part, std::span<const size_t> chunk_order,
                     CopyStarted copy_started) = 0;
  // Calls `ready` exactly once, at once or later on another thread: OK once segment `seg` of
  // chunk `chunk` of the input is in the operation's buffer, or why it never will be.
  virtual void when_input_ready(size_t chunk, size_t seg, Ready ready) = 0;
  // Blocks until the whole input is in the operation's buffer (an operation with nothing to
  // schedule: a group of one). The first copy's failure otherwise.
  virtual Status load_all() = 0;
  // Segment `seg` of chunk `chunk` of the result is final: nothing writes it again. It may be
  // moved on from now.
  virtual void result_final(size_t chunk, size_t seg) = 0;
};

}  // namespace longhaul::collective
