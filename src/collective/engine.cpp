#include "collective/engine.hpp"

#include <numeric>

#include <fmt/format.h>

#include "collective/request.hpp"

namespace longhaul::collective {

namespace {

// The fields every call's signature has (signature.hpp); a block counts only with a codec.
Signature signature_of(Call call, quant::DType dtype, quant::Codec codec, size_t block,
                       Schedule schedule) {
  Signature signature;
  signature.call = call;
  signature.dtype = static_cast<uint8_t>(dtype);
  signature.codec = static_cast<uint8_t>(codec);
  signature.block = codec == quant::Codec::kNone ? 0 : static_cast<uint32_t>(block);
  signature.schedule = schedule;
  return signature;
}

}  // namespace

CollectiveEngine::CollectiveEngine(runtime::WorkerPool& workers) : workers_(workers) {}

CollectiveEngine::~CollectiveEngine() {
  abort_all(closed_error("collective engine shut down"));
  // The workers are shared: wait for this engine's operations, not for the pool.
  std::vector<std::shared_ptr<Operation>> ops;
  {
    MutexLock lock(mu_);
    for (auto& w : in_flight_)
      if (auto op = w.lock()) ops.push_back(std::move(op));
  }
  for (auto& op : ops) {
    (void)op->wait();
    op->drop_links();
  }
}

Result<std::shared_ptr<AllReduceOp>> CollectiveEngine::allreduce(const RingView& view,
                                                                 const AllReduceSpec& spec) {
  if (Status s = validate(spec, view); !s) return s;
  const Schedule schedule = choose_schedule(spec, view);
  Signature signature =
      signature_of(spec.reduce_scatter() ? Call::kReduceScatter : Call::kAllReduce, spec.dtype,
                   spec.codec, spec.block, schedule);
  signature.op = static_cast<uint8_t>(spec.op);
  signature.count = spec.count;
  if (spec.reduce_scatter()) signature.layout = layout_hash(spec.chunk_counts);
  auto op = launch(view, check_links(schedule, view), spec.timeout, signature, [&](uint64_t seq) {
    return make_allreduce(workers_, buffers_, view, spec, seq, schedule);
  });
  if (!op) return op.status();
  return std::static_pointer_cast<AllReduceOp>(*op);
}

Result<std::shared_ptr<GatherOp>> CollectiveEngine::gather(const RingView& view,
                                                           const GatherSpec& spec) {
  if (Status s = validate(spec, view); !s) return s;
  const Schedule schedule = choose_schedule(spec, view);
  const std::vector<size_t>& counts = spec.signed_counts ? *spec.signed_counts : spec.counts;
  Signature signature = signature_of(spec.call, spec.dtype, spec.codec, spec.block, schedule);
  signature.root = spec.root;
  signature.count = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  signature.layout = layout_hash(counts);
  auto op = launch(view, check_links(schedule, view), spec.timeout, signature, [&](uint64_t seq) {
    return make_gather(workers_, buffers_, view, spec, seq, schedule);
  });
  if (!op) return op.status();
  return std::static_pointer_cast<GatherOp>(*op);
}

Result<std::shared_ptr<Operation>> CollectiveEngine::launch(const RingView& view,
                                                            const Status& missing_link,
                                                            std::chrono::milliseconds timeout,
                                                            const Signature& signature,
                                                            const Factory& make) {
  std::shared_ptr<Operation> op;
  Status refused;
  uint64_t seq = 0;
  {
    // Numbering, the abort check and registering the operation happen at once: an abort_epoch
    // either refuses this operation or finds it in flight.
    MutexLock lock(mu_);
    seq = next_seq(view);
    refused = refusal(view, missing_link);
    if (refused.is_ok()) {
      op = make(seq);
      if (view.size > 1) op->set_signature(signature);
      if (success_gate_)
        op->set_success_gate([gate = success_gate_, epoch = view.epoch, seq] { gate(epoch, seq); });
      remember(op);
    }
  }
  if (!refused.is_ok()) {
    // The members that start this (epoch, seq) fail at once instead of waiting for our segments,
    // and what they already sent is dropped: left in a link's early-arrival store, it could fill
    // it and stall the link that later epochs reuse.
    const transport::Tag operation = Tag{view.epoch, seq}.operation_bits();
    for (size_t p = 0; p < view.links.size(); ++p)
      if (p != view.rank && view.links[p])
        view.links[p]->cancel_matching(operation, Tag::kOperationMask, refused);
    return refused;
  }
  // A failed prepare fails the operation, which cancels it at both ends of every link: the other
  // members start this (epoch, seq) too and would otherwise wait for our segments.
  if (Status s = op->prepare(); !s) return s;
  op->begin();
  if (timeout.count() > 0) {
    Status why = timeout_error(fmt::format(
        "the operation (epoch {}, number {}) did not finish within its timeout of {} ms",
        view.epoch, seq, timeout.count()));
    deadlines_.watch(op, DeadlineWatch::Clock::now() + timeout, why,
                     [this, epoch = view.epoch, why] {
                       TimeoutListener listener;
                       {
                         MutexLock lock(mu_);
                         listener = timeout_listener_;
                       }
                       if (listener) listener(epoch, why);
                     });
  }
  return op;
}

void CollectiveEngine::set_timeout_listener(TimeoutListener listener) {
  MutexLock lock(mu_);
  timeout_listener_ = std::move(listener);
}

uint64_t CollectiveEngine::next_seq(const RingView& view) {
  if (view.epoch != epoch_) {
    epoch_ = view.epoch;
    next_seq_ = 0;
  }
  return next_seq_++;
}

Status CollectiveEngine::refusal(const RingView& view, const Status& missing_link) const {
  if (aborted_ && view.epoch <= aborted_epoch_ && view.size > 1)
    return abort_status_.with_context(
        fmt::format("epoch {} was aborted; update the topology", view.epoch));
  return missing_link;
}

void CollectiveEngine::remember(const std::shared_ptr<Operation>& op) {
  // Completed operations a caller still holds stay listed: the destructor drops their links.
  std::erase_if(in_flight_, [](const std::weak_ptr<Operation>& w) { return w.expired(); });
  in_flight_.push_back(op);
}

void CollectiveEngine::set_success_gate(SuccessGate gate) {
  MutexLock lock(mu_);
  success_gate_ = std::move(gate);
}

void CollectiveEngine::close_epoch(uint64_t epoch, const Status& why) {
  MutexLock lock(mu_);
  if (!aborted_ || epoch > aborted_epoch_) {
    aborted_ = true;
    aborted_epoch_ = epoch;
    abort_status_ = why;
  }
}

void CollectiveEngine::abort_epoch(uint64_t epoch, const Status& why) {
  close_epoch(epoch, why);
  // A late or repeated abort of an old epoch leaves the operations of newer ones alone.
  abort_matching(why, [epoch](const Operation& op) { return op.epoch() <= epoch; });
}

void CollectiveEngine::abort_all(const Status& why) {
  abort_matching(why, [](const Operation&) { return true; });
}

void CollectiveEngine::abort_matching(const Status& why,
                                      const std::function<bool(const Operation&)>& which) {
  std::vector<std::shared_ptr<Operation>> ops;
  {
    MutexLock lock(mu_);
    for (auto& w : in_flight_)
      if (auto p = w.lock(); p && which(*p)) ops.push_back(std::move(p));
  }
  for (auto& op : ops) op->abort(why);
}

}  // namespace longhaul::collective
