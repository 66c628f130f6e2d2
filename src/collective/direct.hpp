// The direct schedule: the reduce-scatter as an all-to-all (each member sends chunk p straight to
// its owner p, who combines every contribution in one fixed order), then the all-gather as one
// step (the owner sends its final bytes to everyone). The same bytes per member as the ring, one
// step instead of N-1, and a quantized contribution is encoded exactly once. Needs a link to
// every member.
#pragma once

#include <atomic>
#include <vector>

#include "collective/allreduce.hpp"

namespace longhaul::collective {

class DirectAllReduce final : public AllReduceOp {
 public:
  DirectAllReduce(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                  const AllReduceSpec& spec, uint64_t seq);

 private:
  void start_schedule() override;
  bool uses_link(size_t) const override { return true; }

  // The steps of one segment.
  void scatter(size_t peer, size_t seg);
  void recv_reduce_send_all(size_t seg);

  void post_receives(size_t peer, size_t seg);

  std::vector<std::atomic<size_t>> contributions_;  // per segment of the owned chunk
};

}  // namespace longhaul::collective
