// Where a collective's input comes from and where its result goes, segment by segment (an
// all-reduce or reduce-scatter, an all-gather or broadcast), when the caller's buffers are not the
// host memory the operation runs on: the GPU layer's staging pipeline
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
// blocking would hold back every later copy's report: a CUDA stream's host function).
//
// Segments this member only sends, never reduces into (its contributions to the other owners'
// chunks), may arrive already encoded when the operation travels quantized: the staging encodes
// them where the input lives (a GPU kernel) and only the encoded bytes cross to the host.
//
// Threads: every call is thread-safe; callbacks run on whatever thread completed the copy, and
// must not block.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "collective/partition.hpp"
#include "common/status.hpp"
#include "quant/codec.hpp"

namespace longhaul::collective {

// How the schedule will read the input, given when it starts.
struct InputPlan {
  const Partition& part;
  // Every chunk of the input the schedule reads (an all-reduce: all; an all-gather: this
  // member's), in the order it first reads them, so copies start with what is needed first.
  std::span<const size_t> chunk_order;
  // Chunks this member only sends as its contribution, never reduces into, and the codec they
  // travel in: the staging may deliver their segments encoded (SegmentStaging::encoded_input).
  // Empty where the contribution cannot be encoded ahead (no codec, or error feedback, which
  // needs the residual the host holds).
  std::span<const size_t> send_only_chunks;
  quant::Codec codec = quant::Codec::kNone;
  size_t block = quant::kDefaultBlock;
};

class SegmentStaging {
 public:
  using Ready = std::function<void(Status)>;
  // Called before each copy begin() or result_final() starts; returns what to call, exactly once
  // and on any thread, once that copy has ended: OK once it arrived, otherwise why not (the
  // operation then fails at once, whether or not anything waits for that segment).
  using CopyEnded = std::function<void(Status)>;
  using CopyStarted = std::function<CopyEnded()>;
  virtual ~SegmentStaging() = default;

  // Called once, when the schedule starts; the input's copies start here, in `input`'s order.
  virtual void begin(const InputPlan& input, CopyStarted copy_started) = 0;
  // Calls `ready` exactly once, at once or later on another thread: OK once segment `seg` of
  // chunk `chunk` of the input is in the operation's buffer, or why it never will be.
  virtual void when_input_ready(size_t chunk, size_t seg, Ready ready) = 0;
  // Once when_input_ready has said segment `seg` of a send-only chunk is there: its encoding
  // (quant::encode of its values with InputPlan's codec and block), which the operation sends as
  // it is. Empty where the staging copied the values instead; the operation encodes them then.
  // The bytes stay valid until the segment's result is written.
  virtual std::span<const std::byte> encoded_input(size_t chunk, size_t seg) const = 0;
  // Blocks until the whole input is in the operation's buffer (an operation with nothing to
  // schedule: a group of one). The first copy's failure otherwise.
  virtual Status load_all() = 0;
  // Segment `seg` of chunk `chunk` of the result is final: the operation's buffer holds its
  // values, and nothing writes or reads them there again. It may be moved on from now (and its
  // place there reused). `encoded`: where the segment travelled quantized, the final bytes whose
  // decoding (InputPlan's codec and block) the result is, valid until the operation completes;
  // the staging may move those instead and decode them where the result goes. Empty: the values
  // themselves travelled.
  virtual void result_final(size_t chunk, size_t seg, std::span<const std::byte> encoded) = 0;
};

// `staging`'s encoded_input(chunk, seg), held to the `wire_bytes` the format expects: empty
// without a staging or where it copied values; LH_ERR_INTERNAL when the size differs.
inline Result<std::span<const std::byte>> encoded_input(const SegmentStaging* staging, size_t chunk,
                                                        size_t seg, size_t wire_bytes) {
  if (staging == nullptr) return std::span<const std::byte>{};
  const auto bytes = staging->encoded_input(chunk, seg);
  if (!bytes.empty() && bytes.size() != wire_bytes)
    return Status(LH_ERR_INTERNAL, "a staged contribution's encoding has the wrong size");
  return bytes;
}

}  // namespace longhaul::collective
