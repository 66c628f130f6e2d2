// One agreed round: the protocol every all-or-nothing step of the group follows (docs/protocol.md,
// "Settling a round").
//
//   attempt → decide → restore → re-form without joiners → retry
//
// 1. attempt: this member runs its part (an all-reduce, a batch, a shared-state sync);
// 2. decide: it reports its outcome and the master decides for the whole group, so every member
//    gets the same answer whatever it saw itself;
// 3. restore: a failed attempt puts back what it changed, so the retry starts from the same data;
// 4. re-form: the members re-form the ring without lost members and without joiners (the retry
//    must be every new member's next operation); the rails of a node re-form together
//    (GroupControl::agree_in_node): a rail whose attempt was decided OK re-forms beside a
//    sibling whose attempt failed, then waits with it until the sibling's round is settled too;
// 5. retry on the new ring, or give up, as the caller's SettlePolicy says.
//
// The batch call (batch.hpp), the sync engine's rounds and shared-state syncs, and the node
// group's rail all-reduce are calls to settle(); each keeps only its policy.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.hpp"
#include "peer/group.hpp"

namespace longhaul::peer {

// A collective's failure that the group mends by re-forming its ring and trying again: a peer or
// link lost, or the operation aborted.
bool retryable(const Status& s);

// What the caller decides; the defaults are the batch call's.
struct SettlePolicy {
  // Attempts at most; 0: until one is decided OK (or a failure is fatal).
  uint32_t max_attempts = 1;
  // The kind of node agreement point the rails re-form at (GroupControl::agree_in_node); 0: none,
  // for callers whose rails agree otherwise (the node group agrees in its local group).
  uint32_t node_point = 0;
  // A local failure that no retry can mend ends the settle with it, before re-forming. Default:
  // anything but retryable().
  std::function<bool(const Status& local)> fatal;
  // Retry only when the re-formed ring lost a member (an attempt that failed with everyone still
  // there would fail again: the sync engine's rounds drop it instead).
  bool retry_only_after_loss = false;
  // After the last attempt failed: re-form before returning (the sync engine: its next collective
  // runs on the mended ring), or leave that to the caller (the batch call: its caller re-forms
  // with joiners).
  bool reform_after_last = false;
  // Whether this member applies the decision. Default: every member succeeded. A quorum round
  // would accept a decision that names this member among enough others.
  std::function<bool(const Decision&)> accept;
};

// The caller's steps.
struct SettleSteps {
  // Runs attempt `n` (from 1) and returns this member's outcome. Empty: this member has nothing to
  // attempt and only keeps its node's rails making the same agreements (settled from the start).
  std::function<Status(uint32_t n)> attempt;
  // Whether the last attempt ran past this member's own deadline (the engine's rounds). The report
  // to the master says so: it counts the members the others waited for (batch_arbiter.hpp). May
  // be empty: never.
  std::function<bool()> late;
  // Undoes what a failed attempt changed. May be empty.
  std::function<void()> restore;
  // Replaces the master's decision (GroupControl::decide) for a caller that decides with more
  // than its group: the node group's rail ANDs the master's decision with its siblings'. Returns
  // whether the attempt applies and the failure to judge (fatal, retry), OK when it applies.
  struct Outcome {
    bool applied = false;
    Status failure;
    std::vector<PeerId> members;  // Decision::members
  };
  std::function<Result<Outcome>(const Status& local)> decide;
};

struct Settled {
  bool applied = false;         // false: dropped, after `attempts` failed attempts
  uint32_t attempts = 0;        // attempts this member ran
  Status local;                 // this member's own outcome of its last attempt
  Status failure;               // why the last attempt failed (this member's, or the decision's)
  std::vector<PeerId> members;  // whom the applied decision took (Decision::members)
};

// Runs the protocol above. An error: a fatal local failure, the group's failure (re-forming or
// deciding failed), or the node's agreement failing; the caller must not go on with the round.
Result<Settled> settle(GroupControl& group, const SettleSteps& steps, const SettlePolicy& policy);

}  // namespace longhaul::peer
