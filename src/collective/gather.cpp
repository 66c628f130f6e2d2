#include "collective/gather.hpp"

#include <cstring>

namespace longhaul::collective {

namespace {

// The output is the guarded buffer, "in place": its segments are copied aside before their first
// write, so a failed operation puts back exactly what it wrote.
GuardedBuffers guarded(const GatherSpec& spec) {
  GuardedBuffers g;
  g.input = spec.output;
  g.output = spec.output;
  g.count = spec.total();
  g.dtype = spec.dtype;
  g.keep_backup = spec.restore_output;
  return g;
}

}  // namespace

GatherOp::GatherOp(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                   const GatherSpec& spec, uint64_t seq, Schedule schedule)
    : Operation(workers, std::move(view), seq, schedule,
                spec.staging ? *spec.staging : transport::host_staging()),
      spec_(spec),
      plan_(schedule, view_.size, view_.rank, spec_),
      buffers_(buffers),
      guard_(guarded(spec_), plan_.partition()),
      format_(make_gather_format(spec_, plan_, guard_, [this](Status s) { fail(std::move(s)); })) {}

Status GatherOp::take_scratch() {
  if (plan_.arena_bytes() > 0) {
    auto arena = buffers_.acquire(plan_.arena_bytes());
    if (!arena) return arena.status();
    arena_ = std::move(*arena);
    format_->set_arena(arena_.data());
  }
  return guard_.prepare(buffers_);
}

Status GatherOp::prepare() {
  // Alone, nothing travels and nothing completes the operation before start().
  if (trivial()) return take_scratch();
  // As a task: an abort meanwhile must not release the scratch while it is being taken.
  return run_here([this]() -> Status {
    expect_transfers(plan_.transfers(schedule_));
    return take_scratch();
  });
}

void GatherOp::start() {
  (void)run_here([this] {
    if (!trivial()) {
      start_schedule();
    } else {  // the output is this member's contribution (encoded and decoded once)
      for (size_t seg = 0; seg < plan_.segments(); ++seg) (void)format_->own(seg);
    }
    return Status::ok();
  });
}

void GatherOp::post_landing(size_t peer, size_t step, size_t chunk, size_t seg,
                            std::function<void()> then) {
  if (format_->lands_in_output()) guard_.touch_segment(chunk, seg);
  recv(peer, tag(Phase::kAllGather, step, seg), format_->landing(chunk, seg), std::move(then));
}

void GatherOp::adopt(size_t chunk, size_t seg) {
  if (format_->lands_in_output()) return;
  run_task([this, chunk, seg] { format_->adopt(chunk, seg); });
}

void GatherOp::release() {
  guard_.release();
  arena_.reset();
}

std::shared_ptr<GatherOp> make_gather(runtime::WorkerPool& workers, BufferPool& buffers,
                                      RingView view, const GatherSpec& spec, uint64_t seq,
                                      Schedule schedule) {
  if (schedule == Schedule::kDirect)
    return std::make_shared<DirectGather>(workers, buffers, std::move(view), spec, seq);
  return std::make_shared<RingGather>(workers, buffers, std::move(view), spec, seq);
}

}  // namespace longhaul::collective
