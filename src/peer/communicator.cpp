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
  // A collective whose own timeout passed: the members waiting for this one's part would be
  // released only by their own timeouts, so the master aborts the group's collectives of the epoch.
  c->engine_->set_timeout_listener([self](uint64_t epoch, const Status& why) {
    self->session_->request_abort(epoch, why.message());
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
  v.ids.assign(r.ring.begin(), r.ring.end());
  return v;
}

Status Communicator::check_start(collective::Schedule schedule) const {
  LH_RETURN_IF_ERROR(session_->usable());
  // One rule at every size: a ring of 2 or 3 happens to link every member, but a program tested
  // there must not break when a fourth peer joins (docs/collectives.md, "Direct schedule").
  if (schedule == collective::Schedule::kDirect && !session_->options().full_mesh)
    return Status(
        LH_ERR_UNSUPPORTED,
        "the direct schedule needs full_mesh (lh_comm_options.full_mesh on every "
        "member), at every group size; use LH_SCHEDULE_AUTO or LH_SCHEDULE_RING without it");
  return Status::ok();
}

Result<std::shared_ptr<collective::AllReduceOp>> Communicator::allreduce(
    const collective::AllReduceSpec& spec) {
  LH_RETURN_IF_ERROR(check_start(spec.schedule));
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
  LH_RETURN_IF_ERROR(check_start(spec.schedule));
  return engine_->gather(ring_view(), spec);
}

}  // namespace longhaul::peer
