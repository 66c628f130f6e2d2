#include "peer/settle.hpp"

namespace longhaul::peer {

bool retryable(const Status& s) {
  return s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED;
}

namespace {

// One settle's bookkeeping; run() is the protocol of settle.hpp.
class Settler {
 public:
  Settler(GroupControl& group, const SettleSteps& steps, const SettlePolicy& policy)
      : group_(group), steps_(steps), policy_(policy) {}

  Result<Settled> run() {
    bool settled = !steps_.attempt;  // nothing to attempt: only the node's agreements
    out_.applied = settled;
    for (;;) {
      if (!settled) {
        auto decided = attempt_and_decide();
        if (!decided) return decided.status();
        settled = out_.applied;
        if (!settled) {
          if (Status f = judge_failure(); !f) return f;
          if (last_attempt() && !policy_.reform_after_last) return out_;
        }
      }
      auto must_reform = any_rail_must_reform(!settled);
      if (!must_reform) return must_reform.status();
      if (!*must_reform) return out_;
      const std::vector<PeerId> before = group_.view().ring;
      // Joiners wait for the caller's next admission point: the retry must be every new
      // member's next operation.
      LH_RETURN_IF_ERROR(group_.update_topology(/*admit_joiners=*/false));
      if (settled) continue;  // re-formed beside a sibling whose round is not settled yet
      const bool lost_a_member = group_.view().ring != before;
      if (last_attempt() || (policy_.retry_only_after_loss && !lost_a_member))
        settled = true;  // dropped
    }
  }

 private:
  // Steps 1 to 3: this member's attempt, the group's decision, and the restore of a failure.
  Result<bool> attempt_and_decide() {
    ++out_.attempts;
    out_.local = steps_.attempt(out_.attempts);
    auto outcome = steps_.decide ? steps_.decide(out_.local) : decide_with_master();
    if (!outcome || !outcome->applied) restore();
    if (!outcome) return outcome.status();
    out_.applied = outcome->applied;
    out_.failure = outcome->failure;
    out_.members = std::move(outcome->members);
    return out_.applied;
  }

  Result<SettleSteps::Outcome> decide_with_master() {
    const bool late = steps_.late && steps_.late();
    auto decision = group_.decide({.ok = out_.local.is_ok(), .late = late});
    if (!decision) return decision.status();
    SettleSteps::Outcome o;
    o.applied = policy_.accept ? policy_.accept(*decision) : decision->all_succeeded;
    if (o.applied)
      o.members = std::move(decision->members);
    else
      o.failure = !out_.local.is_ok()
                      ? out_.local
                      : Status(LH_ERR_PEER_LOST, "the attempt failed on another member");
    return o;
  }

  void restore() {
    if (steps_.restore) steps_.restore();
  }

  // OK, or the failure when no retry can mend it.
  Status judge_failure() const {
    const bool fatal = policy_.fatal ? policy_.fatal(out_.failure) : !retryable(out_.failure);
    return fatal ? out_.failure : Status::ok();
  }

  bool last_attempt() const {
    return policy_.max_attempts != 0 && out_.attempts >= policy_.max_attempts;
  }

  // Step 4's node agreement: whether any rail of this member's node must re-form (`mine`: this
  // one must). A member of no node, or a caller whose rails agree otherwise, decides alone.
  Result<bool> any_rail_must_reform(bool mine) {
    if (policy_.node_point == 0) return mine;
    auto flags = group_.agree_in_node(policy_.node_point, mine ? 1u : 0u);
    if (!flags) return flags.status();
    return *flags != 0;
  }

  GroupControl& group_;
  const SettleSteps& steps_;
  const SettlePolicy& policy_;
  Settled out_;
};

}  // namespace

Result<Settled> settle(GroupControl& group, const SettleSteps& steps, const SettlePolicy& policy) {
  return Settler(group, steps, policy).run();
}

}  // namespace longhaul::peer
