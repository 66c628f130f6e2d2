#include "collective/allreduce.hpp"

#include <cstring>

#include "collective/direct.hpp"
#include "collective/ring.hpp"
#include "quant/reduce.hpp"

namespace longhaul::collective {

namespace {

GuardedBuffers guarded(const AllReduceSpec& spec) {
  GuardedBuffers g;
  g.input = spec.input;
  g.output = spec.output;
  g.count = spec.count;
  g.dtype = spec.dtype;
  g.keep_backup = spec.restore_input;
  g.residual = spec.residual;
  return g;
}

}  // namespace

AllReduceOp::AllReduceOp(runtime::WorkerPool& workers, BufferPool& buffers, RingView view,
                         const AllReduceSpec& spec, uint64_t seq, Schedule schedule)
    : Operation(workers, std::move(view), seq, schedule,
                spec.staging ? *spec.staging : transport::host_staging(), spec.segment_staging),
      spec_(spec),
      plan_(schedule, view_.size, view_.rank, spec_),
      buffers_(buffers),
      guard_(guarded(spec_), plan_.partition()),
      format_(make_wire_format(spec_, plan_, guard_, [this](Status s) { fail(std::move(s)); })) {}

Status AllReduceOp::prepare() {
  if (trivial()) {
    if (spec_.segment_staging) LH_RETURN_IF_ERROR(spec_.segment_staging->load_all());
    if (spec_.input != result())
      std::memcpy(result(), spec_.input, spec_.count * plan_.element_size());
    return Status::ok();
  }
  // As a task: an abort meanwhile must not release the scratch while it is being taken.
  return run_here([this]() -> Status {
    expect_transfers(plan_.transfers());
    auto arena = buffers_.acquire(plan_.arena_bytes());
    if (!arena) return arena.status();
    arena_ = std::move(*arena);
    format_->set_arena(arena_.data());
    if (spec_.reduce_scatter()) {
      auto work = buffers_.acquire(spec_.count * plan_.element_size());
      if (!work) return work.status();
      work_ = std::move(*work);
      guard_.set_output(work_.data());
      format_->set_work(work_.data());
    }
    return guard_.prepare(buffers_);
  });
}

void AllReduceOp::start() {
  if (trivial()) {
    if (spec_.op == quant::ReduceOp::kAvg && spec_.count > 0)
      if (Status s = quant::finalize_avg(result(), spec_.count, spec_.dtype, 1); !s)
        fail(s.with_context("all-reduce"));
    return finish_now();
  }
  (void)run_here([this] {
    if (spec_.segment_staging) start_staging();
    start_schedule();
    return Status::ok();
  });
}

void AllReduceOp::start_staging() {
  const std::vector<size_t> order = plan_.input_order();
  // Error feedback encodes value + residual, and the residual is the host's: encoded here then.
  const bool encode_ahead = spec_.codec != quant::Codec::kNone && spec_.residual == nullptr;
  const std::vector<size_t> send_only =
      encode_ahead ? plan_.send_only_chunks() : std::vector<size_t>{};
  Operation::begin_staging({.part = plan_.partition(),
                            .chunk_order = order,
                            .send_only_chunks = send_only,
                            .codec = spec_.codec,
                            .block = spec_.block});
}

void AllReduceOp::adopt(size_t chunk, size_t seg, size_t lane) {
  if (format_->lands_in_output()) return values_final(chunk, seg);
  run_task([this, chunk, seg, lane] {
    format_->adopt(chunk, seg, lane);
    final_segment(chunk, seg, format_->landing(chunk, seg, lane));
  });
}

void AllReduceOp::final_segment(size_t chunk, size_t seg, std::span<const std::byte> wire_bytes) {
  // Plain, the values themselves travelled.
  result_final(chunk, seg, format_->lands_in_output() ? std::span<const std::byte>{} : wire_bytes);
}

void AllReduceOp::release() {
  guard_.release();
  arena_.reset();
  work_.reset();
}

Status AllReduceOp::commit() {
  if (spec_.reduce_scatter() && !trivial()) {
    const Range own = plan_.partition().chunk(plan_.own_chunk());
    const size_t elem = plan_.element_size();
    std::memcpy(spec_.scatter_output, work_.data() + own.begin * elem, own.count * elem);
  }
  return spec_.land_output ? spec_.land_output() : Status::ok();
}

std::shared_ptr<AllReduceOp> make_allreduce(runtime::WorkerPool& workers, BufferPool& buffers,
                                            RingView view, const AllReduceSpec& spec, uint64_t seq,
                                            Schedule schedule) {
  if (schedule == Schedule::kDirect)
    return std::make_shared<DirectAllReduce>(workers, buffers, std::move(view), spec, seq);
  return std::make_shared<RingAllReduce>(workers, buffers, std::move(view), spec, seq);
}

}  // namespace longhaul::collective
