#include "collective/direct.hpp"

#include <array>

namespace longhaul::collective {

DirectAllReduce::DirectAllReduce(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                                 const AllReduceSpec& spec, uint64_t seq)
    : AllReduceOp(workers, buffers, std::move(view), spec, seq, Schedule::kDirect),
      contributions_(plan_.segments()) {}

void DirectAllReduce::start_schedule() {
  for (size_t i = 0; i < plan_.steps(); ++i)
    for (size_t seg = 0; seg < plan_.segments(); ++seg) post_receives(plan_.peer_at(i), seg);
  for (size_t i = 0; i < plan_.steps(); ++i)
    for (size_t seg = 0; seg < plan_.segments(); ++seg)
      run_with_input(plan_.peer_at(i), seg,
                     [this, peer = plan_.peer_at(i), seg] { scatter(peer, seg); });
}

// Reduce-scatter: this member's values of segment `seg` of chunk p go straight to p, its owner.
void DirectAllReduce::scatter(size_t peer, size_t seg) {
  send(peer, tag(Phase::kReduceScatter, 0, seg),
       format_->contribution(peer, seg, plan_.peer_index(peer)));
}

// Every contribution to this member's segment is in: combine them in one fixed order (its own
// values, then the others in ring order after it), finish, and send the final bytes to everyone.
void DirectAllReduce::recv_reduce_send_all(size_t seg) {
  const size_t chunk = plan_.rank();
  std::array<const std::byte*, kMaxRingSteps> incoming;
  for (size_t i = 0; i < plan_.steps(); ++i)
    incoming[i] = reduce_in(i, chunk, seg).data();  // lane i is member peer_at(i)'s
  format_->reduce(chunk, seg, std::span(incoming.data(), plan_.steps()), /*finish=*/true);
  if (!plan_.gathers()) return format_->keep(chunk, seg);  // a reduce-scatter
  const auto final_bytes = format_->finish(chunk, seg);
  for (size_t i = 0; i < plan_.steps(); ++i)
    send(plan_.peer_at(i), tag(Phase::kAllGather, 0, seg), final_bytes);
  final_segment(chunk, seg, final_bytes);
}

void DirectAllReduce::post_receives(size_t peer, size_t seg) {
  const size_t lane = plan_.peer_index(peer);
  // The owner p's final bytes of its segment.
  if (plan_.gathers())
    recv(peer, tag(Phase::kAllGather, 0, seg), format_->landing(peer, seg, lane),
         [this, peer, seg, lane] { adopt(peer, seg, lane); });
  // p's contribution to this member's segment; the arrival that completes the set hands the
  // combining to the pool.
  recv(peer, tag(Phase::kReduceScatter, 0, seg), reduce_in(lane, plan_.rank(), seg), [this, seg] {
    if (contributions_[seg].fetch_add(1, std::memory_order_acq_rel) + 1 == plan_.steps())
      run_with_input(plan_.rank(), seg, [this, seg] { recv_reduce_send_all(seg); });
  });
}

}  // namespace longhaul::collective
