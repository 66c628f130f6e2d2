// Staging overlapped with the network: the pipeline between the caller's (device) buffers and
// the pinned host slot an all-reduce runs on (collective/segment_staging.hpp).
//
// When the schedule starts, every input segment's copy into the slot starts at once, in the order
// the schedule reads the chunks; each segment's first reader waits for its own copy only. The
// segments this member only sends (InputPlan::send_only_chunks) are encoded by the engine where
// the input lives, so a quantized all-reduce moves only their encoded bytes across PCIe. As the
// schedule finishes a segment of the result, its copy to the destination starts. So a large
// tensor's PCIe copies run under its network transfers instead of before and after them.
//
// The destination is written segment by segment only where the caller allows unspecified values
// after a failure (an output distinct from the input, or an in-place operation whose restore was
// waived); otherwise land() writes the whole result once the operation has succeeded, and a
// failed operation leaves the caller's buffers untouched.
//
// Lifetime: shared; copies in flight keep it alive. The operation counts every copy begin() and
// result_final() start as one of its tasks, so no copy touches the caller's buffers once the
// operation has completed; nothing here blocks a copy's completion. Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "collective/segment_staging.hpp"
#include "common/mutex.hpp"
#include "gpu/copy_engine.hpp"

namespace longhaul::gpu {

struct PipelineBuffers {
  // `source_count` elements copied into `slot` segment by segment, the first to the slot's element
  // `source_first` (an all-gather's contribution lies at its place in the output); null: `slot`
  // already holds the input.
  const void* source = nullptr;
  std::size_t source_first = 0;
  std::size_t source_count = 0;
  // The operation's buffer (input and output, in place): `bytes` long.
  std::byte* slot = nullptr;
  std::size_t bytes = 0;
  std::size_t element_size = 1;
  // Where the result goes, segment by segment as it becomes final (or, with
  // `destination_after_success`, only once the operation has succeeded, so a failure leaves it
  // untouched). Null: land() calls land_whole.
  void* destination = nullptr;
  bool destination_after_success = false;
  // Keeps `slot` alive as long as the pipeline.
  std::shared_ptr<const void> slot_owner;
};

class StagingPipeline final : public collective::SegmentStaging,
                              public std::enable_shared_from_this<StagingPipeline> {
 public:
  // `land_whole`: moves the whole result on once the operation has succeeded (used when
  // `destination` is null; may be empty when the result stays in the slot).
  static std::shared_ptr<StagingPipeline> create(std::shared_ptr<CopyEngine> engine,
                                                 PipelineBuffers buffers,
                                                 std::function<Status()> land_whole = {});

  void begin(const collective::InputPlan& input, CopyStarted copy_started) override;
  void when_input_ready(size_t chunk, size_t seg, Ready ready) override;
  std::span<const std::byte> encoded_input(size_t chunk, size_t seg) const override;
  Status load_all() override;
  void result_final(size_t chunk, size_t seg, std::span<const std::byte> encoded) override;

  // Once the operation has succeeded: waits for every copy, writes the segments of the result
  // not written yet (or, without a destination, calls land_whole), and returns the first failure.
  // Must run before the operation releases the final bytes result_final was given.
  Status land();

  // Copies started: of the input (`input_encoded` of them encoded where the input lives, and
  // `input_bytes` copied in all), of result segments while the operation ran (overlapped with
  // it), and of the rest by land() (adjacent unencoded segments merged into one copy).
  struct Counts {
    size_t input = 0;
    size_t input_encoded = 0;
    size_t input_bytes = 0;
    size_t output_overlapped = 0;
    size_t output_at_land = 0;
    // Of those, segments moved as their final encoded bytes and decoded where the result goes,
    // and the bytes moved out in all.
    size_t output_decoded = 0;
    size_t output_bytes = 0;
  };
  Counts counts() const;

 private:
  StagingPipeline(std::shared_ptr<CopyEngine> engine, PipelineBuffers buffers,
                  std::function<Status()> land_whole);

  struct Segment {
    collective::Range range;
    // Arrives encoded (this many bytes at the start of its place in the slot); 0: as values.
    size_t encoded_bytes = 0;
    bool arrived = false;
    bool moved_out = false;
    // The final bytes the result is the decoding of, copied to the segment's place in the slot,
    // where moving them is cheaper than the values; empty: the values move.
    std::span<const std::byte> final_encoded;
    Status failure;
    std::vector<Ready> waiters;
  };
  // The bytes a send-only segment of `count` elements arrives in: its encoding where that fits
  // in the segment's own place in the slot (which the operation never reads as values before its
  // result lands there), else 0 (it arrives as values).
  size_t encoded_arrival(const collective::InputPlan& input, size_t count) const;
  // `ended` (may be empty) runs once the copy has ended, with its outcome.
  void start_input_copy(size_t index, const Segment& s, const collective::InputPlan& input,
                        CopyEnded ended);
  void start_output_copy(const collective::Range& r, std::span<const std::byte> encoded,
                         CopyEnded ended);
  // A part of the result to move: its values, or (`encoded` set) the final bytes they decode from.
  struct OutputCopy {
    collective::Range range;
    std::span<const std::byte> encoded;
  };
  // What land() still has to write, runs of adjacent unencoded segments merged into one copy.
  std::vector<OutputCopy> unwritten_segments() REQUIRES(mu_);
  void input_arrived(size_t index, const Status& how);
  // One copy fewer in flight; its failure kept. Wakes wait_all().
  void copy_done(const Status& how) REQUIRES(mu_);
  // Waits for every copy started to report, then settles the engine: the first failure of any.
  Status wait_all();
  std::byte* slot_at(const collective::Range& r) const;
  void* destination_at(const collective::Range& r) const;

  const std::shared_ptr<CopyEngine> engine_;
  const PipelineBuffers buffers_;
  const std::function<Status()> land_whole_;

  mutable Mutex mu_;
  CondVar idle_;
  CopyStarted copy_started_ GUARDED_BY(mu_);
  size_t segments_per_chunk_ GUARDED_BY(mu_) = 0;
  quant::Codec codec_ GUARDED_BY(mu_) = quant::Codec::kNone;
  bool decodes_output_ GUARDED_BY(mu_) = false;  // the engine decodes at the destination
  size_t block_ GUARDED_BY(mu_) = 0;
  std::vector<Segment> segments_ GUARDED_BY(mu_);  // by chunk * segments_per_chunk + seg
  size_t in_flight_ GUARDED_BY(mu_) = 0;
  Status first_failure_ GUARDED_BY(mu_);
  Counts counts_ GUARDED_BY(mu_);
};

}  // namespace longhaul::gpu
