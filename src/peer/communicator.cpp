#include "peer/communicator.hpp"

#include <cstring>

#include <fmt/format.h>

namespace longhaul::peer {

Result<std::unique_ptr<Communicator>> Communicator::create(const CommunicatorOptions& options,
                                                           runtime::Runtime& runtime) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->engine_ = std::make_unique<collective::CollectiveEngine>();
  auto session = PeerSession::create(runtime.io(), options);
  if (!session) return session.status();
  c->session_ = std::move(*session);
  Communicator* self = c.get();
  // An abort from the master (or the session failing) ends every collective in flight with that
  // reason, on every member at once; the caller retries after update_topology.
  c->session_->set_abort_handler([self](uint64_t epoch, const Status& why) {
    self->engine_->abort_epoch(epoch, why);
    PeerSession::AbortHandler user;
    {
      std::lock_guard lock(self->handler_mu_);
      user = self->user_abort_handler_;
    }
    if (user) user(epoch, why);
  });
  return c;
}

Communicator::~Communicator() {
  if (session_) {
    // The session may outlive this object (queued handlers hold it while the runtime runs on):
    // its abort handler points here, so unset it; close() then waits for the strand, so no call
    // of the old handler is still running when it returns.
    session_->set_abort_handler({});
    session_->close();
  }
  if (engine_) engine_->abort_all(closed_error("communicator destroyed"));
  engine_.reset();   // waits for the engine's workers
  session_.reset();  // handlers still queued on the runtime may hold the last references
}

void Communicator::set_abort_handler(PeerSession::AbortHandler handler) {
  std::lock_guard lock(handler_mu_);
  user_abort_handler_ = std::move(handler);
}

collective::RingView Communicator::ring_view() const {
  const RingLinks r = session_->ring_links();
  collective::RingView v;
  v.epoch = r.epoch;
  v.rank = r.rank;
  v.size = std::max<size_t>(r.ring.size(), 1);
  v.links = r.by_rank;
  v.full_mesh = session_->options().full_mesh;
  v.links.resize(v.size);
  return v;
}

Result<std::shared_ptr<collective::AllReduceOp>> Communicator::allreduce(
    const collective::AllReduceSpec& spec) {
  if (Status s = session_->failure(); !s) return s;
  return engine_->allreduce(ring_view(), spec);
}

namespace {

bool retryable(const Status& s) {
  return s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED;
}

}  // namespace

Status Communicator::allreduce_batch(const std::vector<BatchItem>& items,
                                     collective::AllReduceSpec spec, uint32_t max_attempts) {
  if (max_attempts == 0) return invalid_argument("max_attempts must be at least 1");
  const size_t elem = quant::element_size(spec.dtype);
  // Outputs of operations that succeeded here may have failed elsewhere (and in-place outputs are
  // the inputs): keep the inputs so every member can start over from the same data.
  std::vector<std::vector<std::byte>> saved(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const auto* in = static_cast<const std::byte*>(items[i].input);
    saved[i].assign(in, in + items[i].count * elem);
  }
  std::vector<float> saved_residual;
  if (spec.residual) saved_residual.assign(spec.residual, spec.residual + items.front().count);
  const auto restore = [&] {
    for (size_t i = 0; i < items.size(); ++i)
      std::memcpy(const_cast<void*>(items[i].input), saved[i].data(), saved[i].size());
    if (spec.residual) std::copy(saved_residual.begin(), saved_residual.end(), spec.residual);
  };
  for (uint32_t attempt = 1;; ++attempt) {
    Status local = run_batch_attempt(items, spec);
    // The master is the commit point: whatever each member saw (an abort can reach one member
    // after its all-reduces completed and another before), all of them get the same decision.
    auto decision = session_->decide_batch(local.is_ok());
    if (!decision) {
      restore();
      return decision.status();
    }
    if (*decision) return Status::ok();
    restore();
    if (!local.is_ok() && !retryable(local)) return local;
    if (attempt == max_attempts)
      return local.is_ok()
                 ? Status(LH_ERR_PEER_LOST,
                          fmt::format("the batch failed on another peer on all {} attempts",
                                      max_attempts))
                 : local;
    // Every member of the group got the same decision and re-forms the ring here, so the new
    // epoch's members are exactly the ones that run the retry: it must admit no newcomer (its
    // first operation would not be this retry). Joiners are admitted at the caller's next
    // update_topology.
    if (Status s = session_->update_topology(/*admit_joiners=*/false); !s) return s;
  }
}

Status Communicator::run_batch_attempt(const std::vector<BatchItem>& items,
                                       const collective::AllReduceSpec& spec) {
  std::vector<std::shared_ptr<collective::AllReduceOp>> ops;
  Status result;
  for (const auto& item : items) {
    collective::AllReduceSpec s = spec;
    s.input = item.input;
    s.output = item.output;
    s.count = item.count;
    s.restore_input = false;  // allreduce_batch restores every input from its own copy
    auto op = allreduce(s);
    if (!op) {
      result = op.status();
      break;
    }
    ops.push_back(*op);
  }
  for (auto& op : ops) {
    Status s = op->wait();
    if (result.is_ok() && !s) result = s;
  }
  return result;
}

}  // namespace longhaul::peer
