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
                spec.staging ? *spec.staging : transport::host_staging(), spec.segment_staging),
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
  if (trivial()) {
    if (spec_.segment_staging) LH_RETURN_IF_ERROR(spec_.segment_staging->load_all());
    return take_scratch();
  }
  // As a task: an abort meanwhile must not release the scratch while it is being taken.
  return run_here([this]() -> Status {
    expect_transfers(plan_.transfers(schedule_));
    return take_scratch();
  });
}

void GatherOp::start() {
  (void)run_here([this] {
    if (!trivial()) {
      start_staging();
      start_schedule();
    } else {  // the output is this member's contribution (encoded and decoded once)
      for (size_t seg = 0; seg < plan_.segments(); ++seg) (void)format_->own(seg);
    }
    return Status::ok();
  });
}

void GatherOp::start_staging() {
  if (!spec_.segment_staging) return;
  // Only this member's contribution is input, and it is only sent: it may arrive encoded.
  const size_t own[] = {plan_.rank()};
  const bool encoded = spec_.codec != quant::Codec::kNone;
  begin_staging(
      {.part = plan_.partition(),
       .chunk_order = own,
       .send_only_chunks = encoded ? std::span<const size_t>(own) : std::span<const size_t>(),
       .codec = spec_.codec,
       .block = spec_.block});
}

std::span<const std::byte> GatherOp::own_final(size_t seg) {
  const auto bytes = format_->own(seg);
  final_segment(plan_.rank(), seg, bytes);
  return bytes;
}

void GatherOp::final_segment(size_t chunk, size_t seg, std::span<const std::byte> wire_bytes) {
  // Plain, the values themselves travelled.
  result_final(chunk, seg, format_->lands_in_output() ? std::span<const std::byte>{} : wire_bytes);
}

void GatherOp::post_landing(size_t peer, size_t step, size_t chunk, size_t seg,
                            std::function<void()> then) {
  if (format_->lands_in_output()) guard_.touch_segment(chunk, seg);
  recv(peer, tag(Phase::kAllGather, step, seg), format_->landing(chunk, seg), std::move(then));
}

void GatherOp::adopt(size_t chunk, size_t seg) {
  if (format_->lands_in_output()) return values_final(chunk, seg);
  run_task([this, chunk, seg] {
    format_->adopt(chunk, seg);
    final_segment(chunk, seg, format_->landing(chunk, seg));
  });
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
