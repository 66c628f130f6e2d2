#include "collective/allreduce.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <asio/post.hpp>

#include "collective/stream_copy.hpp"
#include "quant/reduce.hpp"

namespace longhaul::collective {

namespace {
// The unit of the fused backup / combine / average passes: two operands of it fit in L1.
constexpr size_t kPieceBytes = 16 << 10;
}  // namespace

// Scratch layout. Every slot of the arena holds one segment's bytes in flight (slot_bytes_: the
// largest segment, encoded if a codec is used). S = segments per chunk, N = members, r = this
// member, q = peer_index(p) in 0..N-2.
//   ring    rs_in  [(s % 2) * S + j]  the reduce-scatter segment of step s arriving from the left;
//                                     two per segment, so step s+1's receive is posted before
//                                     step s is reduced (the gate orders their reuse)
//           (unencoded all-gather segments arrive in place, in the output)
//           ag_in  [s * S + j]        encoded: the all-gather segment of step s (forwarded as is)
//           out    [s * S + j]        encoded: the partial sum sent at reduce-scatter step s
//           final  [j]                encoded: the owned chunk's final encoding
//   direct  rs_in  [q * S + j]        member p's contribution to segment j of chunk r
//           ag_in  [q * S + j]        encoded: member p's final encoding of its segment j
//           out    [q * S + j]        encoded: our contribution to p's chunk
//           final  [j]                encoded: the owned chunk's final encoding
//
// The output itself is touched segment by segment: the first touch of each segment (its
// designated first toucher, never two threads) copies the input in (out of place) or keeps the
// original in backup_ (in place), so a failed in-place operation restores exactly what it touched
// and no caller thread copies the whole buffer up front.

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kAuto:
      return "auto";
    case Schedule::kRing:
      return "ring";
    case Schedule::kDirect:
      return "direct";
  }
  return "?";
}

AllReduceOp::AllReduceOp(asio::thread_pool& pool, BufferPool& buffers, RingView view,
                         AllReduceSpec spec, uint64_t seq, Schedule schedule)
    : pool_(pool),
      buffers_(buffers),
      view_(std::move(view)),
      spec_(spec),
      seq_(seq),
      schedule_(schedule),
      n_(view_.size),
      rank_(view_.rank),
      elem_(quant::element_size(spec.dtype)),
      in_place_(spec.input == spec.output),
      keep_backup_(in_place_ && spec.restore_input),
      encoded_(spec.codec != quant::Codec::kNone),
      part_(spec.count, view_.size,
            std::max<size_t>(1, spec.segment_bytes / quant::element_size(spec.dtype))),
      gates_(part_.segments()),
      contributions_(part_.segments()) {
  info_.world_size = n_;
  info_.schedule = schedule_;
}

AllReduceOp::~AllReduceOp() = default;

std::byte* AllReduceOp::work(size_t chunk, size_t seg) const {
  return static_cast<std::byte*>(spec_.output) + part_.segment(chunk, seg).begin * elem_;
}

std::span<std::byte> AllReduceOp::work_span(size_t chunk, size_t seg) const {
  return {work(chunk, seg), part_.segment(chunk, seg).count * elem_};
}

std::span<float> AllReduceOp::work_f32(size_t chunk, size_t seg) const {
  return {reinterpret_cast<float*>(work(chunk, seg)), part_.segment(chunk, seg).count};
}

size_t AllReduceOp::encoded_bytes(size_t chunk, size_t seg) const {
  auto n = quant::encoded_size(part_.segment(chunk, seg).count, spec_.codec, spec_.block);
  return n ? *n : 0;  // validated in prepare()
}

std::span<std::byte> AllReduceOp::slot(size_t i, size_t bytes) const {
  return {arena_.data() + i * slot_bytes_, bytes};
}

Status AllReduceOp::prepare() {
  // Under the lock: an abort may already be failing the operation (and would release its scratch).
  std::lock_guard lock(mu_);
  if (!failure_.is_ok()) return failure_;
  if (n_ == 1 || spec_.count == 0) {
    if (!in_place_) std::memcpy(spec_.output, spec_.input, spec_.count * elem_);
    return Status::ok();
  }
  const size_t s = part_.segments();
  const size_t seg_max = part_.segment(0, 0).count;  // chunk 0's segment 0 is the largest
  slot_bytes_ = encoded_ ? encoded_bytes(0, 0) : seg_max * elem_;
  size_t slots = 0;
  auto take = [&](size_t count) {
    const size_t base = slots;
    slots += count;
    return base;
  };
  if (schedule_ == Schedule::kRing) {
    rs_in_base_ = take((n_ > 2 ? 2 : 1) * s);
    if (encoded_) {
      ag_in_base_ = take((n_ - 1) * s);
      out_base_ = take((n_ - 1) * s);
      final_base_ = take(s);
    }
  } else {
    rs_in_base_ = take((n_ - 1) * s);
    if (encoded_) {
      ag_in_base_ = take((n_ - 1) * s);
      out_base_ = take((n_ - 1) * s);
      final_base_ = take(s);
    }
  }
  auto arena = buffers_.acquire(slots * slot_bytes_);
  if (!arena.is_ok()) return arena.status();
  arena_ = std::move(*arena);
  if (keep_backup_) {
    auto backup = buffers_.acquire(spec_.count * elem_);
    if (!backup.is_ok()) return backup.status();
    backup_ = std::move(*backup);
  }
  if (spec_.residual) {
    auto r = buffers_.acquire(spec_.count * sizeof(float));
    if (!r.is_ok()) return r.status();
    residual_backup_ = std::move(*r);
    std::memcpy(residual_backup_.data(), spec_.residual, spec_.count * sizeof(float));
  }
  prepared_.assign(n_ * s, 0);
  for (auto& g : gates_) g.store(1, std::memory_order_relaxed);  // step 0 waits for its data only
  expected_ = 4 * (n_ - 1) * s;
  return Status::ok();
}

void AllReduceOp::start() {
  if (n_ == 1 || spec_.count == 0) {
    if (spec_.op == quant::ReduceOp::kAvg && spec_.count > 0)
      check(quant::finalize_avg(spec_.output, spec_.count, spec_.dtype, 1));
    std::lock_guard lock(mu_);
    maybe_finish();
    return;
  }
  // Starting counts as a task: an abort arriving meanwhile must not release the scratch arena
  // while the receives below are being posted into it.
  {
    std::lock_guard lock(mu_);
    ++tasks_;
  }
  if (schedule_ == Schedule::kRing)
    start_ring();
  else
    start_direct();
  std::lock_guard lock(mu_);
  --tasks_;
  maybe_finish();
}

void AllReduceOp::prepare_segment(size_t chunk, size_t seg) {
  if (!claim_segment(chunk, seg)) return;
  const Range range = part_.segment(chunk, seg);
  first_touch(range.begin, range.count);
}

bool AllReduceOp::claim_segment(size_t chunk, size_t seg) {
  auto& done = prepared_[chunk * part_.segments() + seg];
  if (done) return false;
  done = 1;
  return true;
}

void AllReduceOp::first_touch(size_t begin, size_t count) {
  const size_t offset = begin * elem_, bytes = count * elem_;
  if (bytes == 0) return;
  // The backup is read only on failure: stream it past the caches, which keep the segment itself
  // for the reduction that follows.
  if (keep_backup_)
    copy_streaming(backup_.data() + offset, static_cast<const std::byte*>(spec_.output) + offset,
                   bytes);
  else if (!in_place_)
    std::memcpy(static_cast<std::byte*>(spec_.output) + offset,
                static_cast<const std::byte*>(spec_.input) + offset, bytes);
}

void AllReduceOp::combine_unencoded(size_t chunk, size_t seg,
                                    std::span<const std::byte* const> incoming, bool finish) {
  const bool copy = claim_segment(chunk, seg);
  const Range range = part_.segment(chunk, seg);
  const bool average = finish && spec_.op == quant::ReduceOp::kAvg;
  auto* out = static_cast<std::byte*>(spec_.output);
  // Half-precision sums are carried in f32 and rounded once per combine, not once per
  // contribution: the direct schedule's owner adds N values, and an average divides before it
  // rounds. (The ring still rounds at every hop: its partial sums travel in the wire type.)
  const bool widen = (spec_.dtype == quant::DType::kF16 || spec_.dtype == quant::DType::kBF16) &&
                     (spec_.op == quant::ReduceOp::kSum || spec_.op == quant::ReduceOp::kAvg);
  // Piece by piece, small enough to stay in the L1 cache: keep the original, combine every
  // contribution in order, average; one pass over memory instead of one per step. Every kernel
  // is element-wise, so the result is the same bits as whole-segment calls.
  const size_t piece = std::max<size_t>(1, kPieceBytes / elem_);
  // On the stack: a group has at most kMaxRingSteps other members, so no allocation per segment.
  std::array<const void*, kMaxRingSteps> sources;
  for (size_t done = 0; done < range.count; done += piece) {
    const size_t k = std::min(piece, range.count - done);
    const size_t begin = range.begin + done;
    std::byte* dst = out + begin * elem_;
    if (copy) first_touch(begin, k);
    if (widen) {
      for (size_t j = 0; j < incoming.size(); ++j) sources[j] = incoming[j] + done * elem_;
      check(quant::sum_widened(dst, std::span(sources.data(), incoming.size()), k, spec_.dtype,
                               average ? n_ : 1));
      continue;
    }
    for (const std::byte* in : incoming)
      check(quant::reduce_into(dst, in + done * elem_, k, spec_.dtype, spec_.op));
    if (average) check(quant::finalize_avg(dst, k, spec_.dtype, n_));
  }
}

void AllReduceOp::restore_input() {
  if (keep_backup_ && prepared_.size() == n_ * part_.segments()) {
    const size_t s = part_.segments();
    for (size_t c = 0; c < n_; ++c)
      for (size_t j = 0; j < s; ++j) {
        if (!prepared_[c * s + j]) continue;  // never written
        const Range range = part_.segment(c, j);
        const size_t offset = range.begin * elem_;
        std::memcpy(static_cast<std::byte*>(spec_.output) + offset, backup_.data() + offset,
                    range.count * elem_);
      }
  }
  if (residual_backup_)
    std::memcpy(spec_.residual, residual_backup_.data(), spec_.count * sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// Transfers and bookkeeping

void AllReduceOp::send(size_t peer, Phase phase, size_t step, size_t seg,
                       std::span<const std::byte> data) {
  const auto& link = view_.links[peer];
  const uint64_t id = op_id(view_.epoch, seq_, phase, step, seg);
  {
    std::lock_guard lock(mu_);
    if (!failure_.is_ok()) return;
    ++in_flight_;
  }
  link->send(id, data, [self = shared_from_this(), bytes = data.size()](Status s) {
    {
      std::lock_guard lock(self->mu_);
      --self->in_flight_;
      if (s) {
        self->info_.bytes_sent += bytes;
        ++self->completed_;
        self->maybe_finish();
        return;
      }
    }
    // Link completions run outside the link's lock, so cancelling from here is safe.
    self->fail(s);
    std::lock_guard lock(self->mu_);
    self->maybe_finish();
  });
}

void AllReduceOp::recv(size_t peer, Phase phase, size_t step, size_t seg, std::span<std::byte> dst,
                       std::function<void()> then) {
  const auto& link = view_.links[peer];
  const uint64_t id = op_id(view_.epoch, seq_, phase, step, seg);
  {
    std::lock_guard lock(mu_);
    if (!failure_.is_ok()) return;
    ++in_flight_;
  }
  link->recv(id, dst,
             [self = shared_from_this(), bytes = dst.size(), then = std::move(then)](Status s) {
               {
                 std::lock_guard lock(self->mu_);
                 --self->in_flight_;
                 if (s) {
                   self->info_.bytes_received += bytes;
                   ++self->completed_;
                   // `then` counts as a task while it runs, so the operation cannot complete before
                   // the work it hands on is counted in its turn.
                   if (self->failure_.is_ok())
                     ++self->tasks_;
                   else
                     s = self->failure_;
                 }
               }
               if (!s) {
                 self->fail(s);
                 std::lock_guard lock(self->mu_);
                 self->maybe_finish();
                 return;
               }
               then();
               std::lock_guard lock(self->mu_);
               --self->tasks_;
               self->maybe_finish();
             });
}

void AllReduceOp::run_task(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (!failure_.is_ok()) return;
    ++tasks_;
  }
  // Reducing, encoding and decoding run on the worker pool, never on an I/O thread.
  asio::post(pool_, [self = shared_from_this(), task = std::move(task)] {
    bool run;
    {
      std::lock_guard lock(self->mu_);
      run = self->failure_.is_ok();
    }
    if (run) task();
    std::lock_guard lock(self->mu_);
    --self->tasks_;
    self->maybe_finish();
  });
}

bool AllReduceOp::pass_gate(size_t seg) {
  // Arrivals alternate between "step s's data is in" and "step s-1's task is done"; the gate starts
  // at 1 (no task before step 0), so every even count opens a step.
  return gates_[seg].fetch_add(1, std::memory_order_acq_rel) % 2 == 1;
}

void AllReduceOp::check(Status s) {
  if (!s) fail(s.with_context("all-reduce"));
}

void AllReduceOp::abort(Status why) {
  fail(std::move(why));
}

void AllReduceOp::fail(Status why) {
  {
    std::lock_guard lock(mu_);
    if (done_ || !failure_.is_ok()) return;
    failure_ = why;
  }
  // Cancel every transfer of this operation, present and future, on every link it uses: the
  // other end then fails its part too, even a member still waiting for a step we never reached.
  const uint64_t prefix = op_id(view_.epoch, seq_, Phase::kReduceScatter, 0, 0);
  for (size_t p = 0; p < n_; ++p) {
    const bool used = schedule_ == Schedule::kDirect || p == view_.left() || p == view_.right();
    if (p != rank_ && used && p < view_.links.size() && view_.links[p])
      view_.links[p]->cancel_matching(prefix, kOperationMask, why);
  }
  std::lock_guard lock(mu_);
  maybe_finish();
}

void AllReduceOp::maybe_finish() {
  if (done_) return;
  if (!failure_.is_ok()) {
    if (in_flight_ > 0 || tasks_ > 0) return;
    restore_input();
    outcome_ = failure_;
  } else if (completed_ < expected_ || tasks_ > 0) {
    return;
  }
  done_ = true;
  // Nothing touches the scratch any more: the next operation may have it.
  backup_.reset();
  residual_backup_.reset();
  arena_.reset();
  done_cv_.notify_all();
}

bool AllReduceOp::test() const {
  std::lock_guard lock(mu_);
  return done_;
}

Status AllReduceOp::wait() {
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [this] { return done_; });
  return outcome_;
}

Status AllReduceOp::status() const {
  std::lock_guard lock(mu_);
  return outcome_;
}

AllReduceInfo AllReduceOp::info() const {
  std::lock_guard lock(mu_);
  return info_;
}

// ---------------------------------------------------------------------------------------------
// Finishing an owned segment: average, and with a codec encode once and adopt those bytes.

void AllReduceOp::finish_owned_segment(size_t chunk, size_t seg,
                                       std::span<std::byte> encoded_final) {
  const Range range = part_.segment(chunk, seg);
  if (spec_.op == quant::ReduceOp::kAvg && range.count > 0)
    check(quant::finalize_avg(work(chunk, seg), range.count, spec_.dtype, n_));
  if (!encoded_) return;
  check(quant::encode(work_f32(chunk, seg), encoded_final, spec_.codec, spec_.block));
  check(quant::decode(encoded_final, work_f32(chunk, seg), spec_.codec, spec_.block));
}

// ---------------------------------------------------------------------------------------------
// Ring. At reduce-scatter step s member r sends chunk r-s and receives chunk r-s-1; after N-1
// steps it owns chunk r+1. At all-gather step s it sends chunk r+1-s and receives chunk r-s.
//
// Every receive is posted before its data can arrive, so segments land where they belong instead
// of in the link's early-arrival store:
// - reduce-scatter step 0 at the start; step s+1 at the beginning of step s's task (double
//   buffered), before the reduction;
// - unencoded all-gather, which lands in the output: step 0 (chunk r) before this member sends
//   chunk r at reduce-scatter step 0 (its final value needs those bytes), step s+1 (chunk r-s-1)
//   before sending the partial sum of reduce-scatter step s, for the same reason;
// - encoded all-gather (into slots) at the start.

void AllReduceOp::start_ring() {
  const size_t segs = part_.segments();
  const size_t left = view_.left();
  if (encoded_) {
    for (size_t s = 0; s + 1 < n_; ++s) {
      const size_t chunk = (rank_ + n_ - s) % n_;
      for (size_t j = 0; j < segs; ++j)
        recv(left, Phase::kAllGather, s, j,
             slot(ag_in_base_ + s * segs + j, encoded_bytes(chunk, j)),
             [this, s, j] { ring_all_gather_received(s, j); });
    }
  }
  const size_t first_in = (rank_ + n_ - 1) % n_;
  for (size_t j = 0; j < segs; ++j) {
    const size_t bytes =
        encoded_ ? encoded_bytes(first_in, j) : part_.segment(first_in, j).count * elem_;
    recv(left, Phase::kReduceScatter, 0, j, slot(rs_in_base_ + j, bytes), [this, j] {
      if (pass_gate(j)) run_task([this, j] { ring_reduce_scatter_received(0, j); });
    });
  }
  for (size_t j = 0; j < segs; ++j) run_task([this, j] { ring_first_send(j); });
}

void AllReduceOp::ring_first_send(size_t seg) {
  const size_t right = view_.right(), left = view_.left();
  prepare_segment(rank_, seg);
  if (!encoded_) {
    recv(left, Phase::kAllGather, 0, seg, work_span(rank_, seg),
         [this, seg] { ring_all_gather_received(0, seg); });
    send(right, Phase::kReduceScatter, 0, seg, work_span(rank_, seg));
    return;
  }
  auto out = slot(out_base_ + seg, encoded_bytes(rank_, seg));
  const Range range = part_.segment(rank_, seg);
  if (spec_.residual)
    check(quant::encode_with_error_feedback(work_f32(rank_, seg),
                                            {spec_.residual + range.begin, range.count}, out,
                                            spec_.codec, spec_.block));
  else
    check(quant::encode(work_f32(rank_, seg), out, spec_.codec, spec_.block));
  send(right, Phase::kReduceScatter, 0, seg, out);
}

void AllReduceOp::ring_reduce_scatter_received(size_t step, size_t seg) {
  const size_t segs = part_.segments();
  const size_t chunk = (rank_ + 2 * n_ - step - 1) % n_;
  const size_t right = view_.right(), left = view_.left();
  const bool last = step + 2 >= n_;
  if (!last) {
    // Post the next step's receive before reducing this one, into the other slot of the pair
    // (the gate guarantees the task that last read it has finished).
    const size_t next = step + 1;
    const size_t next_in = (rank_ + 2 * n_ - next - 1) % n_;
    const size_t bytes =
        encoded_ ? encoded_bytes(next_in, seg) : part_.segment(next_in, seg).count * elem_;
    recv(left, Phase::kReduceScatter, next, seg, slot(rs_in_base_ + (next % 2) * segs + seg, bytes),
         [this, next, seg] {
           if (pass_gate(seg))
             run_task([this, next, seg] { ring_reduce_scatter_received(next, seg); });
         });
  }
  const auto in =
      slot(rs_in_base_ + (step % 2) * segs + seg,
           encoded_ ? encoded_bytes(chunk, seg) : part_.segment(chunk, seg).count * elem_);
  if (!encoded_) {
    const std::byte* incoming[] = {in.data()};
    combine_unencoded(chunk, seg, incoming, /*finish=*/last);
  } else {
    prepare_segment(chunk, seg);
    check(quant::decode_accumulate(in, work_f32(chunk, seg), spec_.codec, spec_.block));
  }
  if (last) {
    // chunk == rank + 1: this member owns it now.
    if (!encoded_) {
      send(right, Phase::kAllGather, 0, seg, work_span(chunk, seg));
    } else {
      auto final_bytes = slot(final_base_ + seg, encoded_bytes(chunk, seg));
      finish_owned_segment(chunk, seg, final_bytes);
      send(right, Phase::kAllGather, 0, seg, final_bytes);
    }
    return;
  }
  const size_t next = step + 1;
  if (!encoded_) {
    // The chunk's final value comes back as all-gather step `next` only after this partial sum.
    recv(left, Phase::kAllGather, next, seg, work_span(chunk, seg),
         [this, next, seg] { ring_all_gather_received(next, seg); });
    send(right, Phase::kReduceScatter, next, seg, work_span(chunk, seg));
  } else {
    auto out = slot(out_base_ + next * segs + seg, encoded_bytes(chunk, seg));
    check(quant::encode(work_f32(chunk, seg), out, spec_.codec, spec_.block));
    send(right, Phase::kReduceScatter, next, seg, out);
  }
  // This task no longer reads its slot: the next step may run (if its data is in).
  if (pass_gate(seg)) run_task([this, next, seg] { ring_reduce_scatter_received(next, seg); });
}

// Runs on the I/O thread (forwarding is a send); decoding goes to the pool.
void AllReduceOp::ring_all_gather_received(size_t step, size_t seg) {
  const size_t segs = part_.segments();
  const size_t chunk = (rank_ + n_ - step) % n_;
  const bool forward = step + 2 < n_;
  if (!encoded_) {
    if (forward) send(view_.right(), Phase::kAllGather, step + 1, seg, work_span(chunk, seg));
    return;
  }
  const auto bytes = slot(ag_in_base_ + step * segs + seg, encoded_bytes(chunk, seg));
  // Forward the owner's exact bytes; decoding them is what every member does.
  if (forward) send(view_.right(), Phase::kAllGather, step + 1, seg, bytes);
  run_task([this, chunk, seg, bytes] {
    prepare_segment(chunk,
                    seg);  // chunk r's first touch was its encoding; the others' their reduction
    check(quant::decode(bytes, work_f32(chunk, seg), spec_.codec, spec_.block));
  });
}

// ---------------------------------------------------------------------------------------------
// Direct. Reduce-scatter: every member sends its segment j of chunk p to p. Owner r combines the
// contributions in ring order starting after itself. All-gather: r sends its result to everyone.
// An unencoded all-gather segment lands in the output, so its receive is posted when this member
// sends its contribution to that segment (the final value needs it), after keeping the original.

void AllReduceOp::start_direct() {
  const size_t segs = part_.segments();
  for (size_t p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    const size_t q = peer_index(p);
    for (size_t j = 0; j < segs; ++j) {
      if (encoded_)
        recv(p, Phase::kAllGather, 0, j, slot(ag_in_base_ + q * segs + j, encoded_bytes(p, j)),
             [this, p, j] {
               run_task([this, p, j] {
                 prepare_segment(p, j);
                 const auto bytes =
                     slot(ag_in_base_ + peer_index(p) * part_.segments() + j, encoded_bytes(p, j));
                 check(quant::decode(bytes, work_f32(p, j), spec_.codec, spec_.block));
               });
             });
      const size_t bytes =
          encoded_ ? encoded_bytes(rank_, j) : part_.segment(rank_, j).count * elem_;
      recv(p, Phase::kReduceScatter, 0, j, slot(rs_in_base_ + q * segs + j, bytes), [this, j] {
        // The arrival that completes the set hands the combining to the pool.
        if (contributions_[j].fetch_add(1, std::memory_order_acq_rel) + 2 == n_)
          run_task([this, j] { direct_combine(j); });
      });
    }
  }
  for (size_t i = 1; i < n_; ++i)
    for (size_t j = 0; j < segs; ++j)
      run_task([this, p = (rank_ + i) % n_, j] { direct_first_send(p, j); });
}

void AllReduceOp::direct_first_send(size_t p, size_t seg) {
  prepare_segment(p, seg);
  if (!encoded_) {
    recv(p, Phase::kAllGather, 0, seg, work_span(p, seg), [] {});
    send(p, Phase::kReduceScatter, 0, seg, work_span(p, seg));
    return;
  }
  auto out = slot(out_base_ + peer_index(p) * part_.segments() + seg, encoded_bytes(p, seg));
  const Range range = part_.segment(p, seg);
  if (spec_.residual)
    check(quant::encode_with_error_feedback(work_f32(p, seg),
                                            {spec_.residual + range.begin, range.count}, out,
                                            spec_.codec, spec_.block));
  else
    check(quant::encode(work_f32(p, seg), out, spec_.codec, spec_.block));
  send(p, Phase::kReduceScatter, 0, seg, out);
}

void AllReduceOp::direct_combine(size_t seg) {
  const size_t segs = part_.segments();
  const Range range = part_.segment(rank_, seg);
  const size_t bytes = encoded_ ? encoded_bytes(rank_, seg) : range.count * elem_;
  // A fixed order: our own values, then the others in ring order after us.
  if (!encoded_) {
    std::vector<const std::byte*> incoming;
    for (size_t i = 1; i < n_; ++i)
      incoming.push_back(
          slot(rs_in_base_ + peer_index((rank_ + i) % n_) * segs + seg, bytes).data());
    combine_unencoded(rank_, seg, incoming, /*finish=*/true);
  } else {
    prepare_segment(rank_, seg);
    for (size_t i = 1; i < n_; ++i) {
      const auto in = slot(rs_in_base_ + peer_index((rank_ + i) % n_) * segs + seg, bytes);
      check(quant::decode_accumulate(in, work_f32(rank_, seg), spec_.codec, spec_.block));
    }
  }
  const auto final_bytes = encoded_ ? slot(final_base_ + seg, bytes) : std::span<std::byte>{};
  if (encoded_) finish_owned_segment(rank_, seg, final_bytes);
  for (size_t p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    send(p, Phase::kAllGather, 0, seg, encoded_ ? final_bytes : work_span(rank_, seg));
  }
}

// ---------------------------------------------------------------------------------------------
// Engine

CollectiveEngine::CollectiveEngine(unsigned workers)
    : pool_(workers ? workers : std::max(1u, std::thread::hardware_concurrency())) {}

CollectiveEngine::~CollectiveEngine() {
  abort_all(closed_error("collective engine shut down"));
  pool_.join();
}

Result<std::shared_ptr<AllReduceOp>> CollectiveEngine::allreduce(const RingView& view,
                                                                 const AllReduceSpec& spec) {
  if (Status s = quant::check_supported(spec.dtype, spec.op); !s) return s;
  if (spec.count > 0 && (!spec.input || !spec.output))
    return invalid_argument("all-reduce buffers must not be null");
  const size_t elem = quant::element_size(spec.dtype);
  const auto* in = static_cast<const std::byte*>(spec.input);
  const auto* out = static_cast<const std::byte*>(spec.output);
  const size_t bytes = spec.count * elem;
  if (in != out && in < out + bytes && out < in + bytes)
    return invalid_argument("all-reduce input and output overlap partially");
  if (spec.codec != quant::Codec::kNone && spec.dtype != quant::DType::kF32)
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("codec {} needs f32 data, got {}", quant::codec_name(spec.codec),
                              quant::dtype_name(spec.dtype)));
  if (spec.residual && spec.codec == quant::Codec::kNone)
    return invalid_argument("an error-feedback residual needs a quantizing codec");
  if (auto enc = quant::encoded_size(1, spec.codec, spec.block); !enc) return enc.status();
  if (view.size == 0 || view.rank >= view.size) return invalid_argument("invalid ring view");
  if (view.size > kMaxRingSteps + 1)
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("groups of more than {} members", kMaxRingSteps + 1));
  if (spec.segment_bytes < elem)
    return invalid_argument("segment_bytes is smaller than one element");
  // Every member must choose the same schedule, so the choice rests on what they share: the
  // spec, the group's size and whether every member links to every other (not on which links
  // happen to be up here).
  Schedule schedule = spec.schedule;
  if (schedule == Schedule::kAuto)
    schedule = spec.codec != quant::Codec::kNone && view.full_mesh && view.size <= 16
                   ? Schedule::kDirect
                   : Schedule::kRing;
  Status missing_link;
  if (schedule == Schedule::kRing && view.size > 1 &&
      (view.links.size() != view.size || !view.links[view.left()] || !view.links[view.right()]))
    missing_link = Status(LH_ERR_PEER_LOST, "no link to a ring neighbour");
  if (schedule == Schedule::kDirect && !view.has_links_to_all())
    missing_link = view.full_mesh ? Status(LH_ERR_PEER_LOST, "no link to a member of the group")
                                  : Status(LH_ERR_UNSUPPORTED,
                                           "the direct schedule needs links to every member of the "
                                           "group (the communicator's full_mesh)");

  std::shared_ptr<AllReduceOp> op;
  Status refused;
  uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    if (view.epoch != epoch_) {
      epoch_ = view.epoch;
      next_seq_ = 0;
    }
    // A refused operation takes its number too: the members the abort has not reached yet start
    // it under that number.
    seq = next_seq_++;
    if (aborted_ && view.epoch <= aborted_epoch_ && view.size > 1) {
      refused = abort_status_.with_context(
          fmt::format("epoch {} was aborted; update the topology", view.epoch));
    } else if (!missing_link.is_ok()) {
      refused = missing_link;
    } else {
      op.reset(new AllReduceOp(pool_, buffers_, view, spec, seq, schedule));
      std::erase_if(in_flight_, [](const std::weak_ptr<AllReduceOp>& w) {
        auto p = w.lock();
        return !p || p->test();
      });
      in_flight_.push_back(op);
    }
  }
  if (!refused.is_ok()) {
    // The members that start this (epoch, seq) fail at once instead of waiting for our segments,
    // and what they already sent is dropped: left in a link's early-arrival store, it could fill
    // it and stall the link that later epochs reuse.
    const uint64_t prefix = op_id(view.epoch, seq, Phase::kReduceScatter, 0, 0);
    for (size_t p = 0; p < view.links.size(); ++p)
      if (p != view.rank && view.links[p])
        view.links[p]->cancel_matching(prefix, kOperationMask, refused);
    return refused;
  }
  if (Status s = op->prepare(); !s) {
    // The other members start this (epoch, seq) too: cancel it at both ends of every link, or
    // they wait for our segments until an abort for some other reason comes.
    op->abort(s);
    return s;
  }
  op->start();
  return op;
}

void CollectiveEngine::abort_epoch(uint64_t epoch, const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (!aborted_ || epoch > aborted_epoch_) {
      aborted_ = true;
      aborted_epoch_ = epoch;
      abort_status_ = why;
    }
  }
  // A late or repeated abort of an old epoch leaves the operations of newer ones alone.
  abort_matching(why, [epoch](const AllReduceOp& op) { return op.epoch() <= epoch; });
}

void CollectiveEngine::abort_all(const Status& why) {
  abort_matching(why, [](const AllReduceOp&) { return true; });
}

void CollectiveEngine::abort_matching(const Status& why,
                                      const std::function<bool(const AllReduceOp&)>& which) {
  std::vector<std::shared_ptr<AllReduceOp>> ops;
  {
    std::lock_guard lock(mu_);
    for (auto& w : in_flight_)
      if (auto p = w.lock(); p && which(*p)) ops.push_back(std::move(p));
  }
  for (auto& op : ops) op->abort(why);
}

}  // namespace longhaul::collective
