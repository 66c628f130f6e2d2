// Gathering collectives over a group: every member's contribution ends, bit-identical, with every
// member. An all-gather (GatherSpec), a broadcast (an all-gather in which only the root
// contributes) and a barrier (an all-gather of nothing). Segmented and pipelined like the
// all-reduce, striped over each link's connections, optionally quantized (each contribution
// encoded once, by its owner).
//
// The parts: gather_plan.hpp (chunks, segments, slots, who sends what), gather_format.hpp (plain
// or encoded segments), and the two schedules below, written as named steps.
//
// Failure (operation.hpp): the first error cancels every transfer of the operation at both ends
// of each link it uses; the operation then completes with that error, and the output is as it was
// before the call (each segment is copied aside before its first write, unless the caller waived
// that with restore_output = false; then it is unspecified). The input is never written, except
// where it lies in the output (in place), which the same copy restores.
#pragma once

#include <atomic>
#include <memory>

#include "collective/buffer_pool.hpp"
#include "collective/gather_format.hpp"
#include "collective/gather_plan.hpp"
#include "collective/input_guard.hpp"
#include "collective/operation.hpp"

namespace longhaul::collective {

class GatherOp : public Operation {
 public:
  Status prepare() override;
  void start() override;

 protected:
  GatherOp(runtime::WorkerPool& workers, BufferPool& buffers, RingView view, const GatherSpec& spec,
           uint64_t seq, Schedule schedule);

  virtual void start_schedule() = 0;
  // Posts the receive of segment `seg` of `chunk` from `peer` at `step` into its landing place
  // (copied aside first, when the caller keeps the output); `then` runs on the link's thread once
  // it is in.
  void post_landing(size_t peer, size_t step, size_t chunk, size_t seg, std::function<void()> then);
  // Makes landed bytes the output: at once when they landed in it, else decoded on the pool.
  void adopt(size_t chunk, size_t seg);
  // This member's contribution of segment `seg`, made once (GatherFormat::own), its output final.
  std::span<const std::byte> own_final(size_t seg);

  const GatherSpec spec_;
  const GatherPlan plan_;

 private:
  bool trivial() const { return plan_.members() == 1; }
  // Starts the segment staging's copy of this member's contribution (encoded where it travels so).
  void start_staging();
  // The segment's output is final (Operation::result_final); `wire_bytes`: the bytes it travelled
  // as, which every member ends with the value of.
  void final_segment(size_t chunk, size_t seg, std::span<const std::byte> wire_bytes);
  Status take_scratch();
  void restore() override { guard_.restore(); }
  void release() override;
  Status commit() override { return spec_.land_output ? spec_.land_output() : Status::ok(); }

  BufferPool& buffers_;
  InputGuard guard_;
  BufferPool::Buffer arena_;

 protected:
  std::unique_ptr<GatherFormat> format_;  // after guard_: it refers to it
};

// Ring: a contribution passes from neighbour to neighbour, N-1 hops, segment by segment.
class RingGather final : public GatherOp {
 public:
  RingGather(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
             const GatherSpec& spec, uint64_t seq);

 private:
  void start_schedule() override;
  bool uses_link(size_t peer) const override {
    return peer == view_.left() || peer == view_.right();
  }
  // The steps of one segment.
  void send_own(size_t seg);
  void recv_copy_send(size_t step, size_t seg);
};

// Direct: every member sends its contribution straight to every member; one step, one network
// round trip for a small message.
class DirectGather final : public GatherOp {
 public:
  DirectGather(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
               const GatherSpec& spec, uint64_t seq);

 private:
  void start_schedule() override;
  bool uses_link(size_t) const override { return true; }
  // The steps of one segment.
  void send_own_to_all(size_t seg);
};

// The operation for `schedule` (kRing or kDirect), not yet prepared.
std::shared_ptr<GatherOp> make_gather(runtime::WorkerPool& workers, BufferPool& buffers,
                                      RingView view, const GatherSpec& spec, uint64_t seq,
                                      Schedule schedule);

}  // namespace longhaul::collective
