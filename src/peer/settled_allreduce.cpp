#include "peer/settled_allreduce.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "collective/input_guard.hpp"
#include "collective/partition.hpp"
#include "peer/settle.hpp"

namespace longhaul::peer {
namespace {

// What a member puts back when the group decided FAILED: its in-place input (unless the caller
// waived it) and its residual. Its own all-reduce may have succeeded, so the all-reduce's own
// restore cannot serve: the guard copies them before the all-reduce starts.
Result<std::optional<collective::InputGuard>> guard_input(Collectives& collectives,
                                                          const collective::AllReduceSpec& spec) {
  const bool in_place = spec.input == spec.output;
  const bool keep_input = in_place && spec.restore_input;
  if (!keep_input && !spec.residual) return std::optional<collective::InputGuard>();
  collective::GuardedBuffers b;
  b.input = spec.input;
  b.output = spec.output;
  b.count = spec.count;
  b.dtype = spec.dtype;
  b.keep_backup = keep_input;
  b.residual = spec.residual;
  const collective::Partition whole(b.count, 1, std::max<size_t>(b.count, 1));
  std::optional<collective::InputGuard> guard(std::in_place, b, whole);
  LH_RETURN_IF_ERROR(guard->prepare(collectives.buffers()));  // copies the residual
  // Out of place the input is never written; touching would only copy it into the output.
  if (keep_input) guard->keep_all();
  return guard;
}

// An error from the start that the engine did not number: nobody else expects a report of it.
bool numbered(const Status& start_error) {
  return retryable(start_error) || start_error.code() == LH_ERR_IO;
}

}  // namespace

SettledAllReduces::Started SettledAllReduces::start_and_wait(
    const collective::AllReduceSpec& spec, std::optional<collective::OpInfo>* info) {
  Started started;
  Result<std::shared_ptr<collective::AllReduceOp>> op = internal_error("not started");
  {
    MutexLock lock(start_mu_);
    op = collectives_.allreduce(spec);
    started.reported = op.is_ok() || numbered(op.status());
    if (started.reported) started.ticket = next_ticket_++;
  }
  if (!op) {
    started.local = op.status();
    return started;
  }
  started.local = (*op)->wait();
  if (info) *info = (*op)->info();
  return started;
}

Result<bool> SettledAllReduces::decide_in_turn(const Started& started) {
  {
    MutexLock lock(turn_mu_);
    while (decided_ != started.ticket) turn_cv_.wait(turn_mu_);
  }
  auto decision = group_.decide({.ok = started.local.is_ok()});
  {
    // Also after an error: the later tickets then fail on the same ended session.
    MutexLock lock(turn_mu_);
    ++decided_;
    turn_cv_.notify_all();
  }
  if (!decision) return decision.status();
  return decision->all_succeeded;
}

Status SettledAllReduces::run(collective::AllReduceSpec spec,
                              std::optional<collective::OpInfo>* info) {
  // A group of one has nobody to disagree with: its own outcome is the group's.
  if (collectives_.ring_view().size <= 1) {
    auto op = collectives_.allreduce(spec);
    if (!op) return op.status();
    Status s = (*op)->wait();
    if (info) *info = (*op)->info();
    return s;
  }
  auto guard = guard_input(collectives_, spec);
  if (!guard) return guard.status();
  spec.restore_input = false;  // the guard keeps what must be put back
  Started started;
  SettleSteps steps;
  steps.attempt = [&](uint32_t) {
    started = start_and_wait(spec, info);
    return started.local;
  };
  steps.decide = [&](const Status& local) -> Result<SettleSteps::Outcome> {
    SettleSteps::Outcome o;
    o.failure = local;
    if (!started.reported) return o;
    auto all_succeeded = decide_in_turn(started);
    if (!all_succeeded) return all_succeeded.status();
    o.applied = *all_succeeded;
    if (!o.applied && local.is_ok())
      o.failure = aborted_error(
          "the all-reduce failed on another member, so the group decided it failed "
          "everywhere; update the topology and retry");
    return o;
  };
  steps.restore = [&] {
    if (*guard) (*guard)->restore();
  };
  SettlePolicy policy;  // one attempt; the caller re-forms (with joiners) and retries
  auto settled = settle(group_, steps, policy);
  if (*guard) (*guard)->release();
  if (!settled) return settled.status();
  return settled->applied ? Status::ok() : settled->failure;
}

}  // namespace longhaul::peer
