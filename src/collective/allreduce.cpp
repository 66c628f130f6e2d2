#include "collective/allreduce.hpp"

#include <algorithm>
#include <cstring>

#include <asio/post.hpp>
#include <fmt/format.h>

#include "quant/reduce.hpp"

namespace longhaul::collective {

// Buffer layout (S = segments per chunk, N = members, r = this member):
//   ring, unencoded   staging_[j]             the reduce-scatter segment arriving from the left
//                     (all-gather segments arrive in place, in the output)
//   ring, encoded     staging_[j]             as above, encoded
//                     staging_[S + s*S + j]   the all-gather segment of step s (forwarded as is)
//                     outgoing_[s*S + j]      the partial sum sent at reduce-scatter step s
//                     owned_final_[j]         the owned chunk's final encoding
//   direct, unencoded staging_[p*S + j]       member p's contribution to segment j of chunk r
//   direct, encoded   staging_[p*S + j]       as above, encoded
//                     staging_[N*S + p*S + j] member p's final encoding of its chunk's segment j
//                     outgoing_[p*S + j]      our encoded contribution to p's chunk
//                     owned_final_[j]         the owned chunk's final encoding

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kAuto: return "auto";
    case Schedule::kRing: return "ring";
    case Schedule::kDirect: return "direct";
  }
  return "?";
}

AllReduceOp::AllReduceOp(asio::thread_pool& pool, RingView view, AllReduceSpec spec, uint64_t seq, Schedule schedule)
    : pool_(pool),
      view_(std::move(view)),
      spec_(spec),
      seq_(seq),
      schedule_(schedule),
      n_(view_.size),
      rank_(view_.rank),
      elem_(quant::element_size(spec.dtype)),
      part_(spec.count, view_.size, std::max<size_t>(1, spec.segment_bytes / quant::element_size(spec.dtype))),
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

Status AllReduceOp::prepare() {
  const size_t bytes = spec_.count * elem_;
  const size_t s = part_.segments();
  const bool encoded = spec_.codec != quant::Codec::kNone;
  if (spec_.input != spec_.output) {
    std::memcpy(spec_.output, spec_.input, bytes);
  } else if (n_ > 1) {
    const auto* in = static_cast<const std::byte*>(spec_.input);
    input_backup_.assign(in, in + bytes);
  }
  if (spec_.residual && n_ > 1) residual_backup_.assign(spec_.residual, spec_.residual + spec_.count);
  if (n_ == 1) return Status::ok();
  const size_t seg_bytes = part_.segment(0, 0).count * elem_;
  if (schedule_ == Schedule::kRing) {
    if (!encoded) {
      staging_.assign(s, std::vector<std::byte>(seg_bytes));
    } else {
      staging_.resize(s + (n_ - 1) * s);
      outgoing_.resize((n_ - 1) * s);
      owned_final_.resize(s);
    }
    expected_ = 4 * (n_ - 1) * s;
  } else {
    if (!encoded) {
      staging_.resize(n_ * s);
      for (size_t p = 0; p < n_; ++p)
        if (p != rank_)
          for (size_t j = 0; j < s; ++j) staging_[p * s + j].resize(part_.segment(rank_, j).count * elem_);
    } else {
      staging_.resize(2 * n_ * s);
      outgoing_.resize(n_ * s);
      owned_final_.resize(s);
    }
    expected_ = 4 * (n_ - 1) * s;
  }
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
  if (schedule_ == Schedule::kRing) start_ring();
  else start_direct();
  std::lock_guard lock(mu_);
  maybe_finish();
}

// ---------------------------------------------------------------------------------------------
// Transfers and bookkeeping

void AllReduceOp::send(size_t peer, Phase phase, size_t step, size_t seg, std::span<const std::byte> data) {
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
  link->recv(id, dst, [self = shared_from_this(), bytes = dst.size(), then = std::move(then)](Status s) {
    {
      std::lock_guard lock(self->mu_);
      --self->in_flight_;
      if (s) {
        self->info_.bytes_received += bytes;
        ++self->tasks_;  // the follow-up below
      }
    }
    if (!s) {
      self->fail(s);
      std::lock_guard lock(self->mu_);
      self->maybe_finish();
      return;
    }
    // Reducing and decoding run on the worker pool, never on an I/O thread.
    self->post_counted_task(then, /*completes_transfer=*/true);
  });
}

void AllReduceOp::run_task(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (!failure_.is_ok()) return;
    ++tasks_;
  }
  post_counted_task(std::move(task), /*completes_transfer=*/false);
}

void AllReduceOp::post_counted_task(std::function<void()> task, bool completes_transfer) {
  asio::post(pool_, [self = shared_from_this(), task = std::move(task), completes_transfer] {
    bool run;
    {
      std::lock_guard lock(self->mu_);
      run = self->failure_.is_ok();
    }
    if (run) task();
    std::lock_guard lock(self->mu_);
    --self->tasks_;
    if (run && completes_transfer) ++self->completed_;
    self->maybe_finish();
  });
}

void AllReduceOp::check(Status s) {
  if (!s) fail(s.with_context("all-reduce"));
}

void AllReduceOp::abort(Status why) { fail(std::move(why)); }

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
    if (!input_backup_.empty()) std::memcpy(spec_.output, input_backup_.data(), input_backup_.size());
    if (!residual_backup_.empty()) std::copy(residual_backup_.begin(), residual_backup_.end(), spec_.residual);
    outcome_ = failure_;
  } else if (completed_ < expected_ || tasks_ > 0) {
    return;
  }
  done_ = true;
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

void AllReduceOp::finish_owned_segment(size_t chunk, size_t seg, std::vector<std::byte>* encoded_final) {
  const Range range = part_.segment(chunk, seg);
  if (spec_.op == quant::ReduceOp::kAvg && range.count > 0)
    check(quant::finalize_avg(work(chunk, seg), range.count, spec_.dtype, n_));
  if (!encoded_final) return;
  encoded_final->resize(encoded_bytes(chunk, seg));
  check(quant::encode(work_f32(chunk, seg), *encoded_final, spec_.codec, spec_.block));
  check(quant::decode(*encoded_final, work_f32(chunk, seg), spec_.codec, spec_.block));
}

// ---------------------------------------------------------------------------------------------
// Ring. At reduce-scatter step s member r sends chunk r-s and receives chunk r-s-1; after N-1
// steps it owns chunk r+1. At all-gather step s it sends chunk r+1-s and receives chunk r-s.

void AllReduceOp::start_ring() {
  const size_t segs = part_.segments();
  const size_t left = view_.left(), right = view_.right();
  const bool encoded = spec_.codec != quant::Codec::kNone;
  for (size_t s = 0; s + 1 < n_; ++s) {
    const size_t chunk = (rank_ + n_ - s) % n_;
    for (size_t j = 0; j < segs; ++j) {
      std::span<std::byte> dst;
      if (encoded) {
        auto& buf = staging_[segs + s * segs + j];
        buf.resize(encoded_bytes(chunk, j));
        dst = buf;
      } else {
        dst = work_span(chunk, j);  // all-gather lands in place
      }
      recv(left, Phase::kAllGather, s, j, dst, [this, s, j] { ring_all_gather_received(s, j); });
    }
  }
  const size_t first_in = (rank_ + n_ - 1) % n_;
  for (size_t j = 0; j < segs; ++j) {
    auto& in = staging_[j];
    in.resize(encoded ? encoded_bytes(first_in, j) : part_.segment(first_in, j).count * elem_);
    recv(left, Phase::kReduceScatter, 0, j, in, [this, j] { ring_reduce_scatter_received(0, j); });
    if (!encoded) {
      send(right, Phase::kReduceScatter, 0, j, work_span(rank_, j));
      continue;
    }
    run_task([this, j, right] {
      auto& out = outgoing_[j];
      out.resize(encoded_bytes(rank_, j));
      const Range range = part_.segment(rank_, j);
      if (spec_.residual)
        check(quant::encode_with_error_feedback(work_f32(rank_, j), {spec_.residual + range.begin, range.count}, out,
                                                spec_.codec, spec_.block));
      else
        check(quant::encode(work_f32(rank_, j), out, spec_.codec, spec_.block));
      send(right, Phase::kReduceScatter, 0, j, out);
    });
  }
}

void AllReduceOp::ring_reduce_scatter_received(size_t step, size_t seg) {
  const size_t segs = part_.segments();
  const size_t chunk = (rank_ + 2 * n_ - step - 1) % n_;
  const size_t right = view_.right(), left = view_.left();
  auto& in = staging_[seg];
  if (spec_.codec == quant::Codec::kNone) {
    check(quant::reduce_into(work(chunk, seg), in.data(), part_.segment(chunk, seg).count, spec_.dtype, spec_.op));
  } else {
    check(quant::decode_accumulate(in, work_f32(chunk, seg), spec_.codec, spec_.block));
  }
  if (step + 2 < n_) {
    const size_t next = step + 1;
    const size_t next_in = (rank_ + 2 * n_ - next - 1) % n_;
    if (spec_.codec == quant::Codec::kNone) {
      send(right, Phase::kReduceScatter, next, seg, work_span(chunk, seg));
      in.resize(part_.segment(next_in, seg).count * elem_);
    } else {
      auto& out = outgoing_[next * segs + seg];
      out.resize(encoded_bytes(chunk, seg));
      check(quant::encode(work_f32(chunk, seg), out, spec_.codec, spec_.block));
      send(right, Phase::kReduceScatter, next, seg, out);
      in.resize(encoded_bytes(next_in, seg));
    }
    recv(left, Phase::kReduceScatter, next, seg, in, [this, next, seg] { ring_reduce_scatter_received(next, seg); });
    return;
  }
  // chunk == rank + 1: this member owns it now.
  if (spec_.codec == quant::Codec::kNone) {
    finish_owned_segment(chunk, seg, nullptr);
    send(right, Phase::kAllGather, 0, seg, work_span(chunk, seg));
  } else {
    auto& final_bytes = owned_final_[seg];
    finish_owned_segment(chunk, seg, &final_bytes);
    send(right, Phase::kAllGather, 0, seg, final_bytes);
  }
}

void AllReduceOp::ring_all_gather_received(size_t step, size_t seg) {
  const size_t segs = part_.segments();
  const size_t chunk = (rank_ + n_ - step) % n_;
  const bool forward = step + 2 < n_;
  if (spec_.codec == quant::Codec::kNone) {
    if (forward) send(view_.right(), Phase::kAllGather, step + 1, seg, work_span(chunk, seg));
    return;
  }
  const auto& bytes = staging_[segs + step * segs + seg];
  // Forward the owner's exact bytes; decoding them is what every member does.
  if (forward) send(view_.right(), Phase::kAllGather, step + 1, seg, bytes);
  check(quant::decode(bytes, work_f32(chunk, seg), spec_.codec, spec_.block));
}

// ---------------------------------------------------------------------------------------------
// Direct. Reduce-scatter: every member sends its segment j of chunk p to p. Owner r combines the
// contributions in ring order starting after itself. All-gather: r sends its result to everyone.

void AllReduceOp::start_direct() {
  const size_t segs = part_.segments();
  const bool encoded = spec_.codec != quant::Codec::kNone;
  for (size_t p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    for (size_t j = 0; j < segs; ++j) {
      // All-gather: p's final segment j of chunk p.
      std::span<std::byte> dst;
      if (encoded) {
        auto& buf = staging_[n_ * segs + p * segs + j];
        buf.resize(encoded_bytes(p, j));
        dst = buf;
      } else {
        dst = work_span(p, j);
      }
      recv(p, Phase::kAllGather, 0, j, dst, [this, p, j] { direct_all_gather_received(p, j); });
      // Reduce-scatter: p's contribution to our chunk.
      auto& in = staging_[p * segs + j];
      if (encoded) in.resize(encoded_bytes(rank_, j));
      recv(p, Phase::kReduceScatter, 0, j, in, [this, j] { direct_contribution_received(j); });
    }
  }
  for (size_t p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    for (size_t j = 0; j < segs; ++j) {
      if (!encoded) {
        send(p, Phase::kReduceScatter, 0, j, work_span(p, j));
        continue;
      }
      run_task([this, p, j, segs] {
        auto& out = outgoing_[p * segs + j];
        out.resize(encoded_bytes(p, j));
        const Range range = part_.segment(p, j);
        if (spec_.residual)
          check(quant::encode_with_error_feedback(work_f32(p, j), {spec_.residual + range.begin, range.count}, out,
                                                  spec_.codec, spec_.block));
        else
          check(quant::encode(work_f32(p, j), out, spec_.codec, spec_.block));
        send(p, Phase::kReduceScatter, 0, j, out);
      });
    }
  }
}

void AllReduceOp::direct_contribution_received(size_t seg) {
  // The member whose arrival completes the set does the combining, in a fixed order.
  if (contributions_[seg].fetch_add(1) + 2 != n_) return;
  const size_t segs = part_.segments();
  const Range range = part_.segment(rank_, seg);
  for (size_t i = 1; i < n_; ++i) {
    const size_t p = (rank_ + i) % n_;
    const auto& in = staging_[p * segs + seg];
    if (spec_.codec == quant::Codec::kNone)
      check(quant::reduce_into(work(rank_, seg), in.data(), range.count, spec_.dtype, spec_.op));
    else
      check(quant::decode_accumulate(in, work_f32(rank_, seg), spec_.codec, spec_.block));
  }
  auto& final_bytes = owned_final_[seg];
  finish_owned_segment(rank_, seg, spec_.codec == quant::Codec::kNone ? nullptr : &final_bytes);
  for (size_t p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    if (spec_.codec == quant::Codec::kNone) send(p, Phase::kAllGather, 0, seg, work_span(rank_, seg));
    else send(p, Phase::kAllGather, 0, seg, final_bytes);
  }
}

void AllReduceOp::direct_all_gather_received(size_t from, size_t seg) {
  if (spec_.codec == quant::Codec::kNone) return;  // arrived in place
  const auto& bytes = staging_[n_ * part_.segments() + from * part_.segments() + seg];
  check(quant::decode(bytes, work_f32(from, seg), spec_.codec, spec_.block));
}

// ---------------------------------------------------------------------------------------------
// Engine

CollectiveEngine::CollectiveEngine(unsigned workers)
    : pool_(workers ? workers : std::max(1u, std::thread::hardware_concurrency())) {}

CollectiveEngine::~CollectiveEngine() {
  abort_all(closed_error("collective engine shut down"));
  pool_.join();
}

Result<std::shared_ptr<AllReduceOp>> CollectiveEngine::allreduce(const RingView& view, const AllReduceSpec& spec) {
  if (Status s = quant::check_supported(spec.dtype, spec.op); !s) return s;
  if (spec.count > 0 && (!spec.input || !spec.output)) return invalid_argument("all-reduce buffers must not be null");
  const size_t elem = quant::element_size(spec.dtype);
  const auto* in = static_cast<const std::byte*>(spec.input);
  const auto* out = static_cast<const std::byte*>(spec.output);
  const size_t bytes = spec.count * elem;
  if (in != out && in < out + bytes && out < in + bytes)
    return invalid_argument("all-reduce input and output overlap partially");
  if (spec.codec != quant::Codec::kNone && spec.dtype != quant::DType::kF32)
    return Status(LH_ERR_UNSUPPORTED, fmt::format("codec {} needs f32 data, got {}", quant::codec_name(spec.codec),
                                                  quant::dtype_name(spec.dtype)));
  if (spec.residual && spec.codec == quant::Codec::kNone)
    return invalid_argument("an error-feedback residual needs a quantizing codec");
  if (auto enc = quant::encoded_size(1, spec.codec, spec.block); !enc) return enc.status();
  if (view.size == 0 || view.rank >= view.size) return invalid_argument("invalid ring view");
  if (view.size > kMaxRingSteps + 1)
    return Status(LH_ERR_UNSUPPORTED, fmt::format("groups of more than {} members", kMaxRingSteps + 1));
  if (spec.segment_bytes < elem) return invalid_argument("segment_bytes is smaller than one element");
  const bool ring_ok = view.size == 1 || (view.links.size() == view.size && view.links[view.left()] &&
                                          view.links[view.right()]);
  Schedule schedule = spec.schedule;
  if (schedule == Schedule::kAuto)
    schedule = spec.codec != quant::Codec::kNone && view.has_links_to_all() && view.size <= 16 ? Schedule::kDirect
                                                                                                : Schedule::kRing;
  if (schedule == Schedule::kRing && !ring_ok) return Status(LH_ERR_PEER_LOST, "no link to a ring neighbour");
  if (schedule == Schedule::kDirect && !view.has_links_to_all())
    return Status(LH_ERR_UNSUPPORTED, "the direct schedule needs links to every member of the group");

  std::shared_ptr<AllReduceOp> op;
  {
    std::lock_guard lock(mu_);
    if (aborted_ && view.epoch <= aborted_epoch_ && view.size > 1)
      return abort_status_.with_context(fmt::format("epoch {} was aborted; update the topology", view.epoch));
    if (view.epoch != epoch_) {
      epoch_ = view.epoch;
      next_seq_ = 0;
    }
    op.reset(new AllReduceOp(pool_, view, spec, next_seq_++, schedule));
    std::erase_if(in_flight_, [](const std::weak_ptr<AllReduceOp>& w) {
      auto p = w.lock();
      return !p || p->test();
    });
    in_flight_.push_back(op);
  }
  if (Status s = op->prepare(); !s) return s;
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
  abort_all(why);
}

void CollectiveEngine::abort_all(const Status& why) {
  std::vector<std::shared_ptr<AllReduceOp>> ops;
  {
    std::lock_guard lock(mu_);
    for (auto& w : in_flight_)
      if (auto p = w.lock()) ops.push_back(std::move(p));
  }
  for (auto& op : ops) op->abort(why);
}

}  // namespace longhaul::collective
