#include "peer/communicator.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace longhaul::peer {

Result<std::unique_ptr<Communicator>> Communicator::create(const CommunicatorOptions& options,
                                                           runtime::Runtime& runtime) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->engine_ = std::make_unique<collective::CollectiveEngine>(runtime.workers());
  auto session = PeerSession::create(runtime.io(), options, c->control_traffic_, c->data_traffic_);
  if (!session) return session.status();
  c->session_ = std::move(*session);
  c->session_->set_stats_source(
      [sources =
           StatsSources{c->data_traffic_, c->control_traffic_, c->state_traffic_, c->stats_board_}](
          const RingLinks& links) { return make_peer_stats(sources, links); });
  Communicator* self = c.get();
  // An abort from the master (or the session failing) ends every collective in flight with that
  // reason, on every member at once; the caller retries after update_topology.
  c->session_->set_abort_handler([self](uint64_t epoch, const Status& why) {
    self->engine_->abort_epoch(epoch, why);
    PeerSession::AbortHandler user;
    {
      MutexLock lock(self->handler_mu_);
      user = self->user_abort_handler_;
    }
    if (user) user(epoch, why);
    self->notify_failure_listeners();
  });
  // The master lost: no new collective of the epoch starts (the restarted master re-forms the
  // ring), but those in flight run on (docs/protocol.md, "Master restart").
  c->session_->set_master_lost_handler(
      [self](uint64_t epoch, const Status& why) { self->engine_->close_epoch(epoch, why); });
  return c;
}

Communicator::~Communicator() {
  if (session_) {
    // The session may outlive this object (queued handlers hold it while the runtime runs on):
    // its abort handler points here, so unset it; close() then waits for the strand, so no call
    // of the old handler is still running when it returns.
    session_->set_abort_handler({});
    session_->set_master_lost_handler({});
    session_->close();
  }
  if (engine_) engine_->abort_all(closed_error("communicator destroyed"));
  engine_.reset();   // waits for its operations to end
  session_.reset();  // handlers still queued on the runtime may hold the last references
}

void Communicator::set_abort_handler(PeerSession::AbortHandler handler) {
  MutexLock lock(handler_mu_);
  user_abort_handler_ = std::move(handler);
}

uint64_t Communicator::add_failure_listener(FailureListener listener) {
  MutexLock lock(listeners_mu_);
  const uint64_t id = next_listener_id_++;
  failure_listeners_.emplace_back(id, std::move(listener));
  return id;
}

void Communicator::remove_failure_listener(uint64_t id) {
  MutexLock lock(listeners_mu_);
  std::erase_if(failure_listeners_, [id](const auto& l) { return l.first == id; });
}

void Communicator::notify_failure_listeners() {
  const Status failure = session_->failure();
  if (failure.is_ok()) return;  // an abort of the epoch's operations: the communicator lives on
  MutexLock lock(listeners_mu_);
  for (auto& [id, listener] : failure_listeners_) listener(failure);
}

TrafficTotals Communicator::traffic() const {
  TrafficTotals t;
  t.data_sent = data_traffic_->sent();
  t.data_received = data_traffic_->received();
  t.control_sent = control_traffic_->sent();
  t.control_received = control_traffic_->received();
  t.state_sent = state_traffic_->sent();
  t.state_received = state_traffic_->received();
  return t;
}

collective::RingView Communicator::ring_view() const {
  const RingLinks r = session_->ring_links();
  collective::RingView v;
  v.epoch = r.epoch;
  v.rank = r.rank;
  v.size = std::max<size_t>(r.ring.size(), 1);
  v.links.assign(r.by_rank.begin(), r.by_rank.end());
  v.full_mesh = session_->options().full_mesh;
  v.links.resize(v.size);
  return v;
}

Result<std::shared_ptr<collective::AllReduceOp>> Communicator::allreduce(
    const collective::AllReduceSpec& spec) {
  if (Status s = session_->failure(); !s) return s;
  auto op = engine_->allreduce(ring_view(), spec);
  // The session may have failed meanwhile (its links closed under the start): its reason, e.g.
  // LH_ERR_NODE_EVICTED, says more than the closed link.
  if (!op) {
    if (Status s = session_->failure(); !s) return s;
  }
  return op;
}

Result<std::shared_ptr<collective::GatherOp>> Communicator::gather(
    const collective::GatherSpec& spec) {
  if (Status s = session_->failure(); !s) return s;
  return engine_->gather(ring_view(), spec);
}

bool retryable(const Status& s) {
  return s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED;
}

Status Communicator::allreduce_batch(const std::vector<BatchItem>& items,
                                     collective::AllReduceSpec spec, uint32_t max_attempts) {
  if (max_attempts == 0) return invalid_argument("max_attempts must be at least 1");
  // Outputs of operations that succeeded here may have failed elsewhere, and an in-place output
  // is the input: guard the inputs (and the residual) as an in-place all-reduce does, so every
  // member can start over from the same data.
  std::vector<collective::InputGuard> guards;
  guards.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    collective::GuardedBuffers b;
    b.input = items[i].input;
    b.output = items[i].output;
    b.count = items[i].count;
    b.dtype = spec.dtype;
    b.residual = i == 0 ? spec.residual : nullptr;  // a residual serves a batch of one
    const collective::Partition whole(b.count, 1, std::max<size_t>(b.count, 1));
    auto& guard = guards.emplace_back(b, whole);
    if (Status s = guard.prepare(engine_->buffers()); !s) return s;
    guard.keep_all();
  }
  const auto restore = [&] {
    for (auto& guard : guards) guard.restore();
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
