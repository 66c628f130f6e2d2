#include "collective/ring.hpp"

namespace longhaul::collective {

// Every receive is posted before its data can arrive, so segments land where they belong instead
// of in the link's early-arrival store: all of the all-gather's and reduce-scatter step 0's at
// the start, step s+1's when step s's reduction begins. Reduce-scatter receives alternate between
// two slots per segment; the gate runs step s+1 only once its data is in and step s's task (the
// last reader of that slot) has finished.

RingAllReduce::RingAllReduce(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                             const AllReduceSpec& spec, uint64_t seq)
    : AllReduceOp(workers, buffers, std::move(view), spec, seq, Schedule::kRing),
      gates_(plan_.segments()) {}

void RingAllReduce::start_schedule() {
  for (auto& gate : gates_) gate.store(1, std::memory_order_relaxed);  // no task before step 0
  for (size_t seg = 0; seg < plan_.segments(); ++seg) {
    if (plan_.gathers())
      for (size_t step = 0; step < plan_.steps(); ++step) post_gather_receive(step, seg);
    post_reduce_receive(0, seg);
  }
  for (size_t seg = 0; seg < plan_.segments(); ++seg)
    run_with_input(plan_.ring_send_chunk(0), seg, [this, seg] { send_own(seg); });
}

// Step 0: push this member's own values of chunk r to the right.
void RingAllReduce::send_own(size_t seg) {
  const size_t chunk = plan_.ring_send_chunk(0);
  send(view_.right(), tag(Phase::kReduceScatter, 0, seg), format_->contribution(chunk, seg, 0));
}

// Reduce-scatter step s (not the last): the partial sum of chunk r-s-1 arrives from the left;
// add this member's values and pass it on to the right.
void RingAllReduce::recv_reduce_send(size_t step, size_t seg) {
  post_reduce_receive(step + 1, seg);  // into the other slot, which no task reads any more
  const size_t chunk = plan_.ring_reduce_chunk(step);
  const std::byte* incoming[] = {reduce_in(step % 2, chunk, seg).data()};
  format_->reduce(chunk, seg, incoming, /*finish=*/false);
  send(view_.right(), tag(Phase::kReduceScatter, step + 1, seg),
       format_->partial(chunk, seg, step + 1));
  // This task no longer reads its slot: the next step may run once its data is in.
  if (pass_gate(seg)) schedule_reduce_step(step + 1, seg);
}

// The last reduce-scatter step: chunk r+1 is complete here with this member's values. Finish it
// (average, encode once) and start the all-gather with its final bytes; a reduce-scatter keeps
// them.
void RingAllReduce::recv_reduce_copy_send(size_t seg) {
  const size_t step = plan_.steps() - 1;
  const size_t chunk = plan_.ring_reduce_chunk(step);
  const std::byte* incoming[] = {reduce_in(step % 2, chunk, seg).data()};
  format_->reduce(chunk, seg, incoming, /*finish=*/true);
  if (!plan_.gathers()) return format_->keep(chunk, seg);
  const auto final_bytes = format_->finish(chunk, seg);
  send(view_.right(), tag(Phase::kAllGather, 0, seg), final_bytes);
  final_segment(chunk, seg, final_bytes);
}

// All-gather step t: the owner's final bytes of chunk r-t arrive. Pass them on unchanged (every
// member must end with the same bytes) unless the right neighbour owns them, and keep them. Runs
// on the link's thread: forwarding is only a send, and adopting encoded bytes is a task.
void RingAllReduce::recv_copy_send(size_t step, size_t seg) {
  const size_t chunk = plan_.ring_gather_chunk(step);
  if (step + 1 < plan_.steps())
    send(view_.right(), tag(Phase::kAllGather, step + 1, seg), format_->landing(chunk, seg, step));
  adopt(chunk, seg, step);
}

void RingAllReduce::post_reduce_receive(size_t step, size_t seg) {
  const size_t chunk = plan_.ring_reduce_chunk(step);
  recv(view_.left(), tag(Phase::kReduceScatter, step, seg), reduce_in(step % 2, chunk, seg),
       [this, step, seg] {
         if (pass_gate(seg)) schedule_reduce_step(step, seg);
       });
}

void RingAllReduce::post_gather_receive(size_t step, size_t seg) {
  const size_t chunk = plan_.ring_gather_chunk(step);
  recv(view_.left(), tag(Phase::kAllGather, step, seg), format_->landing(chunk, seg, step),
       [this, step, seg] { recv_copy_send(step, seg); });
}

// A reduce step reads this member's input of the chunk it reduces.
void RingAllReduce::schedule_reduce_step(size_t step, size_t seg) {
  run_with_input(plan_.ring_reduce_chunk(step), seg,
                 [this, step, seg] { run_reduce_step(step, seg); });
}

void RingAllReduce::run_reduce_step(size_t step, size_t seg) {
  if (plan_.ring_last_reduce_step(step))
    recv_reduce_copy_send(seg);
  else
    recv_reduce_send(step, seg);
}

bool RingAllReduce::pass_gate(size_t seg) {
  // Arrivals alternate between "step s's data is in" and "step s-1's task is done"; the gate
  // starts at 1 (no task before step 0), so every even count opens a step.
  return gates_[seg].fetch_add(1, std::memory_order_acq_rel) % 2 == 1;
}

}  // namespace longhaul::collective
