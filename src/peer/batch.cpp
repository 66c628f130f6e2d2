#include "peer/batch.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "collective/input_guard.hpp"
#include "collective/partition.hpp"
#include "peer/settle.hpp"

namespace longhaul::peer {
namespace {

// Starts every item's all-reduce and waits for all of them; the first failure.
Status run_batch_attempt(Collectives& collectives, const std::vector<BatchItem>& items,
                         const collective::AllReduceSpec& spec) {
  std::vector<std::shared_ptr<collective::AllReduceOp>> ops;
  Status result;
  for (const auto& item : items) {
    collective::AllReduceSpec s = spec;
    s.input = item.input;
    s.output = item.output;
    s.count = item.count;
    s.restore_input = false;  // the batch restores every input from its own copy
    auto op = collectives.allreduce(s);
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

// Outputs of operations that succeeded here may have failed elsewhere, and an in-place output is
// the input: guard the inputs (and the residual) as an in-place all-reduce does, so every member
// can start over from the same data.
Result<std::vector<collective::InputGuard>> guard_inputs(Collectives& collectives,
                                                         const std::vector<BatchItem>& items,
                                                         const collective::AllReduceSpec& spec) {
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
    if (Status s = guard.prepare(collectives.buffers()); !s) return s;
    guard.keep_all();
  }
  return guards;
}

}  // namespace

Status allreduce_batch(GroupControl& group, Collectives& collectives,
                       const std::vector<BatchItem>& items, collective::AllReduceSpec spec,
                       uint32_t max_attempts) {
  if (max_attempts == 0) return invalid_argument("max_attempts must be at least 1");
  auto guards = guard_inputs(collectives, items, spec);
  if (!guards) return guards.status();
  SettleSteps steps;
  steps.attempt = [&](uint32_t) { return run_batch_attempt(collectives, items, spec); };
  steps.restore = [&] {
    for (auto& guard : *guards) guard.restore();
  };
  SettlePolicy policy;
  policy.max_attempts = max_attempts;
  auto settled = settle(group, steps, policy);
  if (!settled) return settled.status();
  if (settled->applied) return Status::ok();
  if (!settled->local.is_ok()) return settled->local;
  return Status(LH_ERR_PEER_LOST,
                fmt::format("the batch failed on another peer on all {} attempts", max_attempts));
}

}  // namespace longhaul::peer
