// The ring schedule of a gathering operation: member r sends its contribution to its right; every
// contribution then passes from neighbour to neighbour until the member before its owner has it,
// segment by segment, so the hops of different segments overlap. Every receive is posted at the
// start, so segments land where they belong instead of in a link's early-arrival store.
#include "collective/gather.hpp"

namespace longhaul::collective {

RingGather::RingGather(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                       const GatherSpec& spec, uint64_t seq)
    : GatherOp(workers, buffers, std::move(view), spec, seq, Schedule::kRing) {}

void RingGather::start_schedule() {
  for (size_t step = 0; step < plan_.steps(); ++step) {
    const size_t chunk = plan_.ring_recv_chunk(step);
    for (size_t seg = 0; seg < plan_.segments(); ++seg)
      if (plan_.travels(chunk, seg))
        post_landing(view_.left(), step, chunk, seg,
                     [this, step, seg] { recv_copy_send(step, seg); });
  }
  for (size_t seg = 0; seg < plan_.segments(); ++seg)
    if (plan_.travels(plan_.rank(), seg))
      run_with_input(plan_.rank(), seg, [this, seg] { send_own(seg); });
}

// Step 0: this member's contribution goes to its right.
void RingGather::send_own(size_t seg) {
  send(view_.right(), tag(Phase::kAllGather, 0, seg), own_final(seg));
}

// Step t: the contribution of member r-1-t arrives from the left. Pass the bytes on unchanged
// unless the right neighbour is their owner, and keep them. Runs on the link's thread: forwarding
// is only a send, and decoding is a task.
void RingGather::recv_copy_send(size_t step, size_t seg) {
  const size_t chunk = plan_.ring_recv_chunk(step);
  if (plan_.ring_forwards(step))
    send(view_.right(), tag(Phase::kAllGather, step + 1, seg), format_->landing(chunk, seg));
  adopt(chunk, seg);
}

}  // namespace longhaul::collective
