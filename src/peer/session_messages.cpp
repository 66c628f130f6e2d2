// What the session does with each control message from the master (session.hpp): every message
// is checked against the session's state, then handled on the strand.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <asio/post.hpp>

#include "common/log.hpp"
#include "peer/session.hpp"

namespace longhaul::peer {

void PeerSession::on_master_message(const std::vector<std::byte>& bytes) {
  if (state_ == State::kFailed || state_ == State::kLeft) return;
  last_heard_ = Clock::now();
  auto message = wire::decode_control(bytes);
  Status s = message ? handle(std::move(*message)) : message.status();
  if (!s) fail(s.with_context("the master broke the protocol"));
}

Status PeerSession::handle(wire::ControlMessage message) {
  const wire::ControlType type = wire::control_type(message);
  return std::visit(
      [this, type](auto& m) -> Status {
        if constexpr (requires { this->on(std::move(m)); })
          return this->on(std::move(m));
        else
          return unexpected(type);  // a type the master never sends a peer
      },
      message);
}

Status PeerSession::expect_state(wire::ControlType type, std::initializer_list<State> legal) const {
  return std::ranges::find(legal, state_) != legal.end() ? Status::ok() : unexpected(type);
}

Status PeerSession::unexpected(wire::ControlType type) const {
  return protocol_error(fmt::format("unexpected {} in state {}", wire::control_type_name(type),
                                    static_cast<int>(state_)));
}

Status PeerSession::on(const wire::WelcomeMsg& welcome) {
  LH_RETURN_IF_ERROR(
      expect_state(wire::ControlType::kWelcome, {State::kRegistering, State::kRejoining}));
  if (state_ == State::kRejoining) return resume_after_rejoin(welcome);
  id_ = welcome.peer_id;
  heartbeat_interval_ = std::chrono::milliseconds(welcome.heartbeat_interval_ms);
  heartbeat_misses_ = welcome.heartbeat_misses;
  state_ = State::kJoining;
  log::info("peer", "registered as peer {}; waiting for admission", id_);
  arm_heartbeat();
  return Status::ok();
}

// Legal in every state: a heartbeat only shows that the master is alive, and on_master_message
// has already noted the time.
Status PeerSession::on(const wire::HeartbeatMsg&) {
  return Status::ok();
}

Status PeerSession::on(const wire::TopologyUnchangedMsg& unchanged) {
  LH_RETURN_IF_ERROR(
      expect_state(wire::ControlType::kTopologyUnchanged, {State::kUpdating, State::kLinking}));
  // While linking: the round that proposed a new epoch was called off; stay in the committed one.
  if (state_ == State::kLinking) proposal_.reset();
  if (unchanged.epoch != epoch_)
    return protocol_error(
        fmt::format("TOPOLOGY_UNCHANGED for epoch {} in epoch {}", unchanged.epoch, epoch_));
  state_ = State::kActive;
  complete_call(Status::ok());
  return Status::ok();
}

Status PeerSession::on(const wire::TopologyMsg& proposal) {
  // While linking, a newer proposal replaces the current one: the round restarted (a participant
  // was lost or could not link).
  LH_RETURN_IF_ERROR(expect_state(wire::ControlType::kTopology,
                                  {State::kJoining, State::kUpdating, State::kLinking}));
  const uint64_t floor = proposal_ ? proposal_->epoch : epoch_;
  if (proposal.epoch <= floor)
    return protocol_error(
        fmt::format("TOPOLOGY for epoch {} after epoch {}", proposal.epoch, floor));
  auto topology =
      Topology::from_message(proposal, id_, options_.group, committed_ ? &*committed_ : nullptr);
  if (!topology) return topology.status();
  proposal_ = std::move(*topology);
  state_ = State::kLinking;
  mesh_->propose(*proposal_);
  return Status::ok();
}

Status PeerSession::on(const wire::EpochCommitMsg& commit) {
  LH_RETURN_IF_ERROR(expect_state(wire::ControlType::kEpochCommit, {State::kLinking}));
  // Only the epoch this peer is linking for can be committed.
  if (!proposal_ || proposal_->epoch != commit.epoch)
    return unexpected(wire::ControlType::kEpochCommit);
  epoch_ = commit.epoch;
  mesh_->commit(epoch_);
  publish_view(*proposal_);
  committed_ = std::move(proposal_);  // the base the next proposal's change applies to
  proposal_.reset();
  set_pending(commit.peers_pending);
  batch_attempt_ = 0;
  decided_attempt_ = 0;
  state_ = State::kActive;
  log::info("peer", "peer {} entered epoch {}", id_, epoch_);
  complete_call(Status::ok());
  return Status::ok();
}

// Legal in every state: an abort names its epoch, and the handler ends only that epoch's
// operations.
Status PeerSession::on(const wire::AbortMsg& abort) {
  aborts_.fetch_add(1);
  AbortHandler handler;
  {
    MutexLock lock(mu_);
    handler = on_abort_;
  }
  if (handler) handler(abort.epoch, Status(abort.code, abort.reason));
  return Status::ok();
}

// Legal in any state, but only while decide_batch waits for exactly this attempt of this epoch.
Status PeerSession::on(const wire::BatchDecisionMsg& decision) {
  if (!batch_decision_ || decision.epoch != epoch_ || decision.attempt != batch_attempt_)
    return protocol_error(fmt::format("BATCH_DECISION for attempt {} of epoch {} not awaited",
                                      decision.attempt, decision.epoch));
  *batch_decision_ = decision.ok;
  batch_decision_.reset();
  decided_attempt_ = decision.attempt;  // a restarted master learns it from the REJOIN
  decided_ok_ = decision.ok;
  complete_call(Status::ok());
  return Status::ok();
}

// Legal in any state, but only while agree_in_node waits for exactly this point.
Status PeerSession::on(const wire::NodeAgreedMsg& agreed) {
  if (!node_agreed_ || agreed.point != node_point_)
    return protocol_error(fmt::format("NODE_AGREED for point {} not awaited", agreed.point));
  *node_agreed_ = agreed.flags;
  node_agreed_.reset();
  node_answer_ = agreed.flags;  // a REJOIN carries it (wire::RejoinMsg::node_answer)
  complete_call(Status::ok());
  return Status::ok();
}

Status PeerSession::usable() const {
  if (Status f = failure(); !f) return f;
  if (left_.load()) return closed_error("the communicator has left the run (lh_comm_leave)");
  if (view().epoch == 0)
    return closed_error("the communicator is not connected: call lh_comm_connect first");
  return Status::ok();
}

void PeerSession::set_pending(bool pending) {
  pending_.store(pending);
  { MutexLock lock(pending_mu_); }  // a waiter between its check and its sleep holds it
  pending_changed_.notify_all();
}

bool PeerSession::wait_for_pending(Clock::time_point deadline) const {
  MutexLock lock(pending_mu_);
  while (!peers_pending())
    if (!pending_changed_.wait_until(pending_mu_, deadline)) break;
  return peers_pending();
}

// Legal in every state: the master pushes the flag whenever it changes, and storing it changes
// nothing else.
Status PeerSession::on(const wire::PendingChangedMsg& pending) {
  set_pending(pending.pending);
  return Status::ok();
}

Status PeerSession::on(const wire::ByeMsg&) {
  LH_RETURN_IF_ERROR(expect_state(wire::ControlType::kBye, {State::kLeaving}));
  state_ = State::kLeft;
  shutdown_network();
  complete_call(Status::ok());
  return Status::ok();
}

// Legal in every state: the master may remove a peer at any time, and its word is final.
Status PeerSession::on(const wire::RemovedMsg& removed) {
  fail(Status(removed.code, fmt::format("removed by the master: {}", removed.reason)));
  return Status::ok();
}

// The shared-state sync runs within a committed epoch, never during an update_topology round.
Status PeerSession::on(wire::StatePlanMsg&& plan) {
  LH_RETURN_IF_ERROR(expect_state(wire::ControlType::kStatePlan, {State::kActive}));
  return forward_to_state_sync(std::move(plan));
}

Status PeerSession::on(wire::StateCompleteMsg&& complete) {
  LH_RETURN_IF_ERROR(expect_state(wire::ControlType::kStateComplete, {State::kActive}));
  return forward_to_state_sync(std::move(complete));
}

Status PeerSession::on(wire::StateSourceLostMsg&& source_lost) {
  LH_RETURN_IF_ERROR(expect_state(wire::ControlType::kStateSourceLost, {State::kActive}));
  // A source-lost notice only hurries a fetch along; one that crosses the end of a sync that
  // failed before its STATE_DONE has nothing left to hurry.
  StateHandler handler = state_handler();
  if (handler) handler(wire::ControlMessage(std::move(source_lost)));
  return Status::ok();
}

// Only while waiting for admission: the master tells a rank of an incomplete node what is missing.
Status PeerSession::on(const wire::NodeWaitingMsg& waiting) {
  LH_RETURN_IF_ERROR(expect_state(wire::ControlType::kNodeWaiting, {State::kJoining}));
  std::vector<uint32_t> missing;
  for (uint32_t rail = 0; rail < waiting.rails; ++rail)
    if (!std::ranges::binary_search(waiting.registered, rail)) missing.push_back(rail);
  node_waiting_ = fmt::format(
      "node '{}' was never complete: {} of its {} rails registered, rail(s) {} missing (the "
      "master admits a node only with all its rails)",
      options_.node, waiting.registered.size(), waiting.rails, fmt::join(missing, ", "));
  log::info("peer", "peer {}: {}", id_, node_waiting_);
  return Status::ok();
}

Status PeerSession::forward_to_state_sync(wire::ControlMessage message) {
  StateHandler handler = state_handler();
  if (!handler)
    return protocol_error(fmt::format("{} while no state sync runs",
                                      wire::control_type_name(wire::control_type(message))));
  handler(std::move(message));
  return Status::ok();
}

PeerSession::StateHandler PeerSession::state_handler() const {
  MutexLock lock(mu_);
  return on_state_;
}

}  // namespace longhaul::peer
