// An all-reduce over a group: chunked, pipelined, striped, optionally quantized, bit-exact. The
// same operation runs a reduce-scatter (AllReduceSpec::scatter_output): the first phase only,
// in scratch, with this member's chunk copied to the caller once the operation has succeeded.
//
// The operation is assembled from parts, each in its own file:
//   operation.hpp    the core: transfers, worker tasks, failing and finishing
//   input_guard.hpp  the caller's input kept safe (backup and restore, the residual)
//   step_plan.hpp    all chunk, segment and slot arithmetic, computed once
//   wire_format.hpp  plain or encoded segments, one code path each
//   ring.hpp, direct.hpp  the two schedules, written as named steps
// request.hpp validates a request and picks the schedule; engine.hpp numbers and starts
// operations.
//
// Bit parity: every chunk is combined along one path and its owner's final bytes are what every
// member, the owner included, ends with. With a codec the owner encodes the final chunk once and
// every member decodes those same bytes.
//
// Failure (operation.hpp): the first error cancels every transfer of the operation at both ends of
// each link it uses, and the operation completes with that error once nothing touches its buffers.
// The input is then intact (an in-place operation restores every segment it had touched, unless
// the caller waived that with restore_input = false), the error-feedback residual is restored,
// and the output holds unspecified values.
#pragma once

#include <memory>

#include "collective/allreduce_spec.hpp"
#include "collective/buffer_pool.hpp"
#include "collective/input_guard.hpp"
#include "collective/operation.hpp"
#include "collective/step_plan.hpp"
#include "collective/wire_format.hpp"

namespace longhaul::collective {

class AllReduceOp : public Operation {
 public:
  // Takes the scratch the operation needs (and copies the input for a trivial out-of-place one).
  // The operation's failure instead when it has failed already.
  Status prepare() override;
  // Posts the schedule's first transfers and tasks; the operation runs on from there.
  void start() override;

 protected:
  AllReduceOp(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
              const AllReduceSpec& spec, uint64_t seq, Schedule schedule);

  virtual void start_schedule() = 0;

  // The kReduceIn slot at `lane` for segment `seg` of `chunk` (StepPlan).
  std::span<std::byte> reduce_in(size_t lane, size_t chunk, size_t seg) const {
    return plan_.slot(arena_.data(), StepPlan::Slot::kReduceIn, lane, chunk, seg);
  }
  // Makes an owner's final bytes that landed at `lane` this member's output: at once when they
  // landed in it, else decoded on the worker pool.
  void adopt(size_t chunk, size_t seg, size_t lane);
  // The segment's output values are final (Operation::result_final); `wire_bytes`: the final
  // bytes every member ends with (the output holds their value).
  void final_segment(size_t chunk, size_t seg, std::span<const std::byte> wire_bytes);

  const AllReduceSpec spec_;
  const StepPlan plan_;

 private:
  bool trivial() const { return plan_.members() == 1 || spec_.count == 0; }
  // Starts the staging's input copies (send-only chunks encoded ahead where the codec allows).
  void start_staging();
  // Where the caller's result goes: the output, or a reduce-scatter's chunk.
  void* result() const { return spec_.reduce_scatter() ? spec_.scatter_output : spec_.output; }
  void restore() override { guard_.restore(); }
  void release() override;
  // A reduce-scatter's chunk, from the scratch to the caller.
  Status commit() override;

  BufferPool& buffers_;
  InputGuard guard_;
  BufferPool::Buffer arena_;
  BufferPool::Buffer work_;  // a reduce-scatter's working values (the whole buffer)

 protected:
  std::unique_ptr<WireFormat> format_;  // after guard_: it refers to it
};

// The operation for `schedule` (kRing or kDirect), not yet prepared.
std::shared_ptr<AllReduceOp> make_allreduce(runtime::WorkerPool& workers, BufferPool& buffers,
                                            RingView view, const AllReduceSpec& spec, uint64_t seq,
                                            Schedule schedule);

}  // namespace longhaul::collective
