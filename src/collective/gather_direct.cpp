// The direct schedule of a gathering operation: every member sends its contribution straight to
// every other member and receives theirs from them, one step. For a small message that is one
// network round trip in all (a barrier: each member's arrival, announced to everyone at once).
#include "collective/gather.hpp"

namespace longhaul::collective {

DirectGather::DirectGather(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                           const GatherSpec& spec, uint64_t seq)
    : GatherOp(workers, buffers, std::move(view), spec, seq, Schedule::kDirect) {}

void DirectGather::start_schedule() {
  for (size_t i = 0; i < plan_.steps(); ++i) {
    const size_t peer = plan_.peer_at(i);  // the owner of chunk `peer`
    for (size_t seg = 0; seg < plan_.segments(); ++seg)
      if (plan_.travels(peer, seg))
        post_landing(peer, 0, peer, seg, [this, peer, seg] { adopt(peer, seg); });
  }
  for (size_t seg = 0; seg < plan_.segments(); ++seg)
    if (plan_.travels(plan_.rank(), seg))
      run_with_input(plan_.rank(), seg, [this, seg] { send_own_to_all(seg); });
}

// This member's segment, made once, goes to every member.
void DirectGather::send_own_to_all(size_t seg) {
  const auto bytes = own_final(seg);
  for (size_t i = 0; i < plan_.steps(); ++i)
    send(plan_.peer_at(i), tag(Phase::kAllGather, 0, seg), bytes);
}

}  // namespace longhaul::collective
