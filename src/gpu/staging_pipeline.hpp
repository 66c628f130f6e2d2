// Staging overlapped with the network: the pipeline between the caller's (device) buffers and
// the pinned host slot an all-reduce runs on (collective/segment_staging.hpp).
//
// When the schedule starts, every input segment's copy into the slot starts at once, in the order
// the schedule reads the chunks; each segment's first reader waits for its own copy only. As the
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
  // Copied into `slot` segment by segment; null: `slot` already holds the input.
  const void* source = nullptr;
  // The operation's buffer (input and output, in place): `bytes` long.
  std::byte* slot = nullptr;
  std::size_t bytes = 0;
  std::size_t element_size = 1;
  // Written segment by segment as the result becomes final; null: land() writes the result.
  void* destination = nullptr;
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

  void begin(const collective::Partition& part, std::span<const size_t> chunk_order,
             CopyStarted copy_started) override;
  void when_input_ready(size_t chunk, size_t seg, Ready ready) override;
  Status load_all() override;
  void result_final(size_t chunk, size_t seg) override;

  // Once the operation has succeeded: waits for every copy, writes the segments of the result
  // not written yet (or, without a destination, calls land_whole), and returns the first failure.
  Status land();

  // Copies started: of the input, of result segments while the operation ran (overlapped with
  // it), and of the rest by land().
  struct Counts {
    size_t input = 0;
    size_t output_overlapped = 0;
    size_t output_at_land = 0;
  };
  Counts counts() const;

 private:
  StagingPipeline(std::shared_ptr<CopyEngine> engine, PipelineBuffers buffers,
                  std::function<Status()> land_whole);

  struct Segment {
    collective::Range range;
    bool arrived = false;
    bool moved_out = false;
    Status failure;
    std::vector<Ready> waiters;
  };
  // `ended` (may be empty) runs once the copy has ended, with its outcome.
  void start_input_copy(size_t index, const collective::Range& r, CopyEnded ended);
  void start_output_copy(const collective::Range& r, CopyEnded ended);
  void input_arrived(size_t index, const Status& how);
  // One copy fewer in flight; its failure kept. Wakes wait_all().
  void copy_done(const Status& how) REQUIRES(mu_);
  // Waits for every copy started, then settles the engine: the first failure of any.
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
  std::vector<Segment> segments_ GUARDED_BY(mu_);  // by chunk * segments_per_chunk + seg
  size_t in_flight_ GUARDED_BY(mu_) = 0;
  Status first_failure_ GUARDED_BY(mu_);
  Counts counts_ GUARDED_BY(mu_);
};

}  // namespace longhaul::gpu
