// The CPU implementation of a node's local group (local_group.hpp): the ranks are processes of
// one machine that share one POSIX shared-memory segment. Each round of a step, every rank posts
// a piece of its buffer into its own slot of the segment, a barrier (shared_barrier.hpp) lets the
// others read it, and a second barrier frees the slots for the next round; so the segment stays
// small (a header and one slot per rank) whatever the buffers' size.
//
// Forming: rank 0 creates the segment under the group's name (removing a stale one left by a
// group that never formed), every other rank opens it, and each waits until all have joined; rank
// 0 then unlinks the name. A rank that finds a segment whose creator is dead takes it for stale
// and waits for the new one. A sibling that dies (pidfd: seen within 250 ms whether or not its
// parent has reaped it), never arrives within the timeout, or destroys its group, ends the group
// on every rank.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "node/local_group.hpp"
#include "node/shared_barrier.hpp"
#include "node/shared_segment.hpp"

namespace longhaul::node {

struct ShmHeader;  // the segment's layout (shm_layout.hpp)

struct ShmLocalGroupOptions {
  std::string name;  // the segment's name (shared_segment.hpp); the same on every rank
  uint32_t rank = 0;
  uint32_t size = 1;  // 1 to kMaxLocalRanks
  // Shared memory per rank for one round: the pieces a step moves at once. At least 64 bytes
  // per rank of the group.
  size_t slot_bytes = size_t{4} << 20;
  // How long a rank waits for its siblings within a data step, and for them all to come when
  // forming. agree() waits without a limit (a sibling may be in its rail's all-reduce): a dead
  // sibling still ends it, seen by pidfd (every rank of a node must share one PID namespace).
  std::chrono::milliseconds timeout{120000};
};

class ShmLocalGroup final : public node::LocalGroup {
 public:
  static constexpr uint32_t kMaxLocalRanks = 64;

  // Joins the group, blocking until every rank has (or the timeout: LH_ERR_TIMEOUT naming the
  // ranks that never came). LH_ERR_INVALID_ARGUMENT for bad options or when the ranks disagree on
  // the group's shape; LH_ERR_IO when the system refuses the shared memory.
  static Result<std::unique_ptr<ShmLocalGroup>> create(const ShmLocalGroupOptions& options);
  // Ends the group for every rank (a sibling's call fails with LH_ERR_CLOSED) and unmaps it.
  ~ShmLocalGroup() override;

  uint32_t rank() const override { return options_.rank; }
  uint32_t size() const override { return options_.size; }
  Status reduce_scatter(const void* input, void* shard, size_t count, quant::DType dtype,
                        quant::ReduceOp op) override;
  Status all_gather(const void* shard, void* output, size_t count, quant::DType dtype) override;
  Status agree(const Status& mine) override;
  void abort(const Status& why) override;
  Status failure() const override { return barrier_->aborted(); }

 private:
  ShmLocalGroup(ShmLocalGroupOptions options, SharedSegment segment);
  static Result<SharedSegment> create_segment(const ShmLocalGroupOptions& options);
  static Result<SharedSegment> open_segment(const ShmLocalGroupOptions& options);
  Status join();
  // Aborts the group with `why` and returns it.
  Status abort_with(const Status& why);
  Status siblings_alive();
  ShmHeader& header() const;
  std::byte* slot(uint32_t rank) const;
  // Rank r's sub-slot for the pieces of chunk `owner` (reduce-scatter).
  std::byte* piece_slot(uint32_t rank, uint32_t owner) const;
  size_t piece_bytes() const;
  // dst = the n elements of every rank's sub-slot for this rank, reduced in rank order.
  Status reduce_piece(void* dst, size_t n, quant::DType dtype, quant::ReduceOp op) const;

  ShmLocalGroupOptions options_;
  SharedSegment segment_;
  std::unique_ptr<SharedBarrier> barrier_;
  std::vector<int> pidfds_;  // per rank: -1 until opened (own rank never)
};

}  // namespace longhaul::node
