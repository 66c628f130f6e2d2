// The engine and the group's membership: the start collective (adopting the group's shared
// state), the admission point every H steps, and the shared-state syncs both need.
#include <algorithm>

#include <fmt/format.h>

#include "state/sync.hpp"
#include "sync/engine.hpp"

namespace longhaul::sync {

std::vector<uint64_t> SyncEngine::ring_ids() const {
  return group_.view().ring;
}

// Adopts the group's shared state and sets the local parameters from θ_g. At the group's first
// start (the shared step counter is 0) the sync elects one θ_g among the peers' own parameters;
// a peer starting later downloads it, finds the group at the admission point of step t, and takes
// part in what the group launches there, contributing nothing to those rounds.
Status SyncEngine::join_group() {
  LH_RETURN_IF_ERROR(sync_shared_state());
  const uint64_t t = state_.step();
  for (uint32_t f = 0; f < layout_.fragments(); ++f) {
    LH_RETURN_IF_ERROR(layout_.merge(f, state_.theta_g(f), 0.0f, workers_));
    last_reset_[f] = t;
  }
  if (t == 0) return Status::ok();
  staged_code_ = Contribution::kNone;
  std::fill(staging_.begin(), staging_.end(), 0.0f);
  return launch_due(t);
}

// A resume: this peer's checkpoint is its vote in the start collective. Every peer of a group that
// resumes together from checkpoints of the same step holds the same shared state, so the sync
// moves nothing and every peer goes on exactly where it stopped (its own parameters are the
// trainer's checkpoint's). A peer whose checkpoint the group outvotes (an older one) is refused:
// it should start afresh, without a checkpoint, and join as a new peer.
Status SyncEngine::resume_group(const EngineCheckpoint& checkpoint) {
  LH_RETURN_IF_ERROR(restore(checkpoint));
  const uint64_t mine = state_hash();
  LH_RETURN_IF_ERROR(sync_shared_state());
  if (state_hash() != mine)
    return Status(LH_ERR_STATE_MISMATCH,
                  fmt::format("the checkpoint {} holds another state than the group's (an older "
                              "step?): start without it to join as a new peer",
                              options_.resume_path));
  return Status::ok();
}

// Every peer reaches the admission point at the same step, where no round is in flight. It
// re-forms there only when a round the group applied since the last point said that a member saw
// a change pending: the master answers each update_topology when it arrives, so members that asked
// on their own would disagree about a joiner that registered between their calls (one admits it,
// another has gone on in the old epoch, and they run different rounds from then on). Deciding on
// an applied round's masks costs no extra message and no wait: every member holds the same masks.
// The rails of a node each hold their own group's masks, so they agree through the master (one
// message each) and re-form together when any of them is due. A member that joined downloads
// the shared state in the sync that follows; every rail of a node goes through the sync's
// agreements, also one whose group gained nobody, so that the rails keep making the same calls.
Status SyncEngine::admit() {
  bool gained = false;
  auto due = any_rail_of_node(NodePoint::kAdmission, admission_due_);
  admission_due_ = false;
  if (!due) return due.status();
  if (*due) {
    const auto before = ring_ids();
    LH_RETURN_IF_ERROR(group_.update_topology(/*admit_joiners=*/true));
    const auto after = ring_ids();
    gained = std::any_of(after.begin(), after.end(), [&](uint64_t id) {
      return std::find(before.begin(), before.end(), id) == before.end();
    });
  }
  const uint64_t point = state_.step() / options_.sync_every;
  const bool verify = options_.verify_every > 0 && point % options_.verify_every == 0;
  return sync_shared_state(/*take_part=*/gained || verify);
}

// A shared-state sync whose outcome the group agrees on (peer/settle.hpp): a sync that failed
// anywhere (a source lost, the group reconfiguring, a source too slow) is repeated by every member
// after re-forming the ring, until it succeeds. The rails of a node re-form together: a rail whose
// sync succeeded (or that takes no part) re-forms beside a sibling whose sync failed, and waits
// with it until the sibling's sync succeeds too.
Status SyncEngine::sync_shared_state(bool take_part) {
  peer::SettleSteps steps;
  if (take_part)
    steps.attempt = [&](uint32_t) {
      state::SyncResult result;
      return state_sync_.sync(state_.registry(), wire::SyncStrategy::kEnforcePopular, &result);
    };
  peer::SettlePolicy policy;
  policy.max_attempts = 0;
  policy.node_point = static_cast<uint32_t>(NodePoint::kStateSync);
  policy.fatal = [](const Status& s) { return !peer::retryable(s) && s.code() != LH_ERR_TIMEOUT; };
  auto settled = peer::settle(group_, steps, policy);
  if (!settled) return settled.status().with_context("the sync engine's shared state");
  return Status::ok();
}

// Whether any rail of this peer's node says `mine`: the rails of a node call update_topology at
// the same step or not at all (a rail alone in it would wait for its siblings, which would wait
// for it in the trainer's next intra-node collective). A peer that is a node of one rail decides
// alone. `kind` lets the master catch rails that diverged (at one point for different reasons).
Result<bool> SyncEngine::any_rail_of_node(NodePoint kind, bool mine) {
  auto flags = group_.agree_in_node(static_cast<uint32_t>(kind), mine ? 1u : 0u);
  if (!flags) return flags.status();
  return *flags != 0;
}

}  // namespace longhaul::sync
