// The session without its master (session.hpp, "Failure"): an admitted peer that loses its
// control link keeps computing and keeps its epoch, ring and data links, reconnects with capped,
// jittered backoff, and REJOINs the master with its view of the run, so that a restarted master
// rebuilds membership from what its members report (docs/protocol.md, "Master restart").
#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "common/log.hpp"
#include "peer/session.hpp"

namespace longhaul::peer {
namespace {

// The first retry comes quickly (a restarted master listens again within a second or so); later
// ones back off to a cap small enough that every member is back well inside the master's recovery
// window (master/recovery.hpp).
constexpr std::chrono::milliseconds kFirstBackoff{50};
constexpr std::chrono::milliseconds kMaxBackoff{500};

std::chrono::milliseconds jittered(std::chrono::milliseconds base) {
  // ±25%: members that lost the master together do not knock on its door in lockstep.
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> spread(-base.count() / 4, base.count() / 4);
  return base + std::chrono::milliseconds(spread(rng));
}

}  // namespace

void PeerSession::lose_master(Status why) {
  if (state_ == State::kReconnecting || state_ == State::kFailed || state_ == State::kLeft) return;
  const bool admitted =
      state_ == State::kActive || state_ == State::kUpdating || state_ == State::kLinking;
  if (options_.master_reconnect_timeout.count() == 0 || (!admitted && state_ != State::kRejoining))
    return fail(std::move(why));
  if (master_) master_->close(closed_error("the master was lost"));
  master_.reset();
  last_loss_ = why;
  if (state_ == State::kRejoining) {  // lost again before the master answered: keep trying
    state_ = State::kReconnecting;
    return reconnect_after(jittered(backoff_));
  }
  resume_ = state_ == State::kActive ? State::kActive : State::kUpdating;
  lost_proposal_ = std::move(proposal_);  // a linking peer reports the proposal it knew
  proposal_.reset();
  state_ = State::kReconnecting;
  reconnect_deadline_ = Clock::now() + options_.master_reconnect_timeout;
  backoff_ = kFirstBackoff;
  master_away_.store(true);
  set_pending(true);  // callers go to update_topology, which waits for the master
  log::warn("peer", "peer {}: {}; keeping epoch {} and reconnecting for up to {} ms", id_,
            why.message(), epoch_, options_.master_reconnect_timeout.count());
  const Status aborted(LH_ERR_ABORTED, fmt::format("the master was lost ({}); the communicator "
                                                   "reconnects: retry after update_topology",
                                                   why.message()));
  AbortHandler handler;
  StateHandler state_handler;
  {
    MutexLock lock(mu_);
    handler = on_master_lost_;
    state_handler = on_state_;
  }
  if (state_handler) state_handler(aborted);
  if (handler) handler(epoch_, aborted);
  reconnect_after(jittered(backoff_));
}

void PeerSession::reconnect_after(std::chrono::milliseconds delay) {
  reconnect_timer_.expires_after(delay);
  reconnect_timer_.async_wait([weak = weak_from_this()](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->state_ != State::kReconnecting) return;
    if (Clock::now() >= self->reconnect_deadline_)
      return self->fail(peer_lost(fmt::format(
          "the master did not come back within {} ms (master_reconnect_timeout); last: {}",
          self->options_.master_reconnect_timeout.count(), self->last_loss_.message())));
    self->async_connect_master();
  });
}

void PeerSession::register_again_later(const Status& why) {
  backoff_ = backoff_.count() == 0 ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
  const auto delay = jittered(backoff_);
  log::info("peer", "the master at {} asks to retry: {}; connecting again in {} ms",
            options_.master_address, why.message(), delay.count());
  reconnect_timer_.expires_after(delay);
  reconnect_timer_.async_wait([weak = weak_from_this()](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->state_ != State::kRegistering) return;
    self->async_connect_master();
  });
}

void PeerSession::on_reconnect(Result<std::shared_ptr<net::Link>> result) {
  if (!result) {
    last_loss_ = result.status();
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
    return reconnect_after(jittered(backoff_));
  }
  attach_master_link(std::move(*result));
  state_ = State::kRejoining;
  send(rejoin_report());
}

wire::RejoinMsg PeerSession::rejoin_report() const {
  wire::RejoinMsg m;
  m.peer_id = id_;
  m.group = options_.group;
  m.advertised_host = advertised_host_;
  m.advertised_port = advertised_port_;
  m.node = options_.node;
  m.rail = options_.rail;
  m.rails = options_.rails;
  m.full_mesh = options_.full_mesh;
  m.epoch = epoch_;
  {
    MutexLock lock(mu_);
    m.ring = view_.ring;
    m.world = static_cast<uint32_t>(view_.world_size);
  }
  if (lost_proposal_) {
    m.proposed_epoch = lost_proposal_->epoch;
    m.proposed_ring = lost_proposal_->ring();
  }
  m.decided_attempt = decided_attempt_;
  m.decided_ok = decided_ok_;
  // A restarted master passes this rail's last node agreement answer on to a sibling still
  // waiting for it (master/node_agreement.hpp).
  m.node_answered = node_agreed_ ? node_point_ - 1 : node_point_;
  m.node_answer = m.node_answered != 0 ? node_answer_ : 0;
  return m;
}

Status PeerSession::resume_after_rejoin(const wire::WelcomeMsg& welcome) {
  if (welcome.peer_id != id_)
    return protocol_error(
        fmt::format("WELCOME for peer {} answering the REJOIN of peer {}", welcome.peer_id, id_));
  heartbeat_interval_ = std::chrono::milliseconds(welcome.heartbeat_interval_ms);
  heartbeat_misses_ = welcome.heartbeat_misses;
  lost_proposal_.reset();
  master_away_.store(false);
  state_ = resume_;
  log::info("peer", "peer {}: rejoined the master in epoch {}", id_, epoch_);
  if (state_ == State::kUpdating) {
    report_failed_links();
    send(wire::UpdateTopologyMsg{epoch_, update_admit_});
  }
  if (batch_decision_) send(wire::BatchReportMsg{epoch_, batch_attempt_, batch_ok_, batch_late_});
  if (node_agreed_) send(wire::NodeAgreeMsg{node_point_, node_kind_, node_flags_});
  return Status::ok();
}

}  // namespace longhaul::peer
