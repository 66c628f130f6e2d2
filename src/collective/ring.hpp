// The ring schedule, in the manner of NCCL's runRing: reduce-scatter in N-1 steps around the ring,
// then all-gather in N-1 steps. At reduce-scatter step s member r sends chunk r-s to its right and
// receives chunk r-s-1 from its left; after the last step it holds chunk r+1 complete, and the
// all-gather passes every owner's final bytes once around the ring. Every segment runs its own
// chain of steps, so sending, receiving and reducing of different segments overlap.
#pragma once

#include <atomic>
#include <vector>

#include "collective/allreduce.hpp"

namespace longhaul::collective {

class RingAllReduce final : public AllReduceOp {
 public:
  RingAllReduce(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                const AllReduceSpec& spec, uint64_t seq);

 private:
  void start_schedule() override;
  bool uses_link(size_t peer) const override {
    return peer == view_.left() || peer == view_.right();
  }

  // The steps of one segment.
  void send_own(size_t seg);
  void recv_reduce_send(size_t step, size_t seg);
  void recv_reduce_copy_send(size_t seg);
  void recv_copy_send(size_t step, size_t seg);

  void post_reduce_receive(size_t step, size_t seg);
  void post_gather_receive(size_t step, size_t seg);
  void schedule_reduce_step(size_t step, size_t seg);
  void run_reduce_step(size_t step, size_t seg);
  // Counts one arrival at segment `seg`'s gate; true for the second arrival of a step (its data
  // is in and the previous step's task has finished), which may then run.
  bool pass_gate(size_t seg);

  std::vector<std::atomic<uint32_t>> gates_;  // per segment
};

}  // namespace longhaul::collective
