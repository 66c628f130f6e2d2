#include "node/node_group.hpp"

#include <xxhash.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "collective/partition.hpp"
#include "quant/reduce.hpp"

namespace longhaul::node {

NodeGroup::NodeGroup(peer::GroupControl& group, peer::Collectives& collectives,
                     peer::FailureSignal& failures, std::unique_ptr<node::LocalGroup> local)
    : group_(group), collectives_(collectives), failures_(failures), local_(std::move(local)) {
  node::LocalGroup* siblings = local_.get();
  listener_id_ =
      failures_.add_failure_listener([siblings](const Status& why) { siblings->abort(why); });
  if (Status failed = group_.failure(); !failed) siblings->abort(failed);
}

NodeGroup::~NodeGroup() {
  failures_.remove_failure_listener(listener_id_);
}

Status NodeGroup::allreduce(const collective::AllReduceSpec& spec, uint32_t max_attempts) {
  if (max_attempts == 0) return invalid_argument("max_attempts must be at least 1");
  if (spec.reduce_scatter())
    return invalid_argument("a node all-reduce has no reduce-scatter output");
  if (spec.count == 0) return Status::ok();
  const size_t es = quant::element_size(spec.dtype);
  const auto* in = static_cast<const std::byte*>(spec.input);
  const auto* out = static_cast<const std::byte*>(spec.output);
  if (in != out && in < out + spec.count * es && out < in + spec.count * es)
    return invalid_argument("send and recv overlap without being the same buffer");
  const Status s = reduce_over_node_and_rails(spec, max_attempts);
  if (s.is_ok()) return s;
  // A node whose local group failed (a sibling died, silent or gone, an abort) cannot take part
  // any more, and the others must not count on it: it leaves the run, so the master evicts it
  // as a whole (its other rails too) and the other nodes retry without it.
  if (Status local = local_->failure(); !local) {
    group_.close();
    return node_evicted(
        fmt::format("this node left the run: its local group failed: {}", local.to_string()));
  }
  return s;
}

Status NodeGroup::reduce_over_node_and_rails(const collective::AllReduceSpec& spec,
                                             uint32_t max_attempts) {
  const size_t es = quant::element_size(spec.dtype);
  const collective::Range mine =
      collective::Partition(spec.count, local_->size(), spec.count).chunk(local_->rank());
  if (Status s = admit_pending_peers(); !s) return s;
  chunk_.resize(mine.count * es);
  std::byte* chunk = chunk_.data();
  // Averages are summed everywhere and divided once at the end, by every contribution.
  const auto sum_op = spec.op == quant::ReduceOp::kAvg ? quant::ReduceOp::kSum : spec.op;
  if (Status s = local_->reduce_scatter(spec.input, chunk, spec.count, spec.dtype, sum_op); !s)
    return s;
  collective::AllReduceSpec rail = spec;
  rail.input = rail.output = chunk;
  rail.count = mine.count;
  rail.op = sum_op;
  rail.residual = spec.residual ? spec.residual + mine.begin : nullptr;
  rail.chunk_counts.clear();
  rail.land_output = {};
  if (Status s = run_attempts(rail, max_attempts); !s) return s;
  if (spec.op == quant::ReduceOp::kAvg && mine.count > 0) {
    const size_t contributions = collectives_.ring_view().size * local_->size();
    if (Status s = quant::finalize_avg(chunk, mine.count, spec.dtype, contributions); !s) {
      local_->abort(s);
      return s;
    }
  }
  return local_->all_gather(chunk, spec.output, spec.count, spec.dtype);
}

Status NodeGroup::admit_pending_peers() {
  const bool pending = group_.peers_pending();
  const Status seen = local_->agree(pending ? aborted_error("peers are pending") : Status::ok());
  if (Status finished = local_->failure(); !finished) return finished;
  if (seen.is_ok()) return Status::ok();
  if (Status s = group_.update_topology(); !s) {
    local_->abort(s);
    return s;
  }
  return Status::ok();
}

Status NodeGroup::run_attempts(const collective::AllReduceSpec& rail, uint32_t max_attempts) {
  // A rail whose attempt was decided OK holds its global sum (and an updated residual) even when
  // another rail failed: every retry starts again from the node's sum and the residual as they
  // were, or a rail would be reduced twice.
  auto* chunk = static_cast<std::byte*>(rail.output);
  const size_t bytes = rail.count * quant::element_size(rail.dtype);
  node_sum_.assign(chunk, chunk + bytes);
  if (rail.residual)
    residual_before_.assign(rail.residual, rail.residual + rail.count);
  else
    residual_before_.clear();
  // A rank whose chunk is empty (fewer elements than ranks) has nothing to send on its rail;
  // neither has its rail's rank on any other node, whose buffers have the same count.
  const bool on_rail = rail.count > 0;
  peer::SettleSteps steps;
  steps.attempt = [&](uint32_t) { return on_rail ? reduce_rail(rail) : Status::ok(); };
  steps.decide = [&](const Status& local) { return decide_with_siblings(local, on_rail); };
  steps.restore = [&] {
    std::copy(node_sum_.begin(), node_sum_.end(), chunk);
    std::copy(residual_before_.begin(), residual_before_.end(), rail.residual);
  };
  peer::SettlePolicy policy;
  policy.max_attempts = max_attempts;
  // No retry helps a node whose local group failed. A failure judged here is the node's (every
  // rank agreed on it); any other error of the settle (re-forming failed) is this rank's alone.
  bool node_failed = false;
  policy.fatal = [&](const Status& s) {
    node_failed = !peer::retryable(s) || !local_->failure();
    return node_failed;
  };
  auto settled = peer::settle(group_, steps, policy);
  if (!settled) {
    // The siblings would wait for this rank's next attempt.
    if (!node_failed) local_->abort(settled.status());
    return settled.status();
  }
  if (settled->applied) return Status::ok();
  return settled->failure.with_context(
      fmt::format("node all-reduce failed on all {} attempts", settled->attempts));
}

Status NodeGroup::reduce_rail(const collective::AllReduceSpec& rail) {
  collective::AllReduceSpec spec = rail;
  spec.restore_input = false;  // run_attempts restores the node's sum itself
  auto op = collectives_.allreduce(spec);
  if (!op) return op.status();
  return (*op)->wait();
}

Result<peer::SettleSteps::Outcome> NodeGroup::decide_with_siblings(const Status& local,
                                                                   bool on_rail) {
  Status mine = local;
  if (on_rail) {
    auto decision = group_.decide({.ok = local.is_ok()});
    if (!decision)
      mine = decision.status();
    else if (!decision->all_succeeded && local.is_ok())
      mine = Status(LH_ERR_PEER_LOST, "the rail's attempt failed on another peer");
  }
  peer::SettleSteps::Outcome outcome;
  outcome.failure = local_->agree(mine);
  outcome.applied = outcome.failure.is_ok();
  return outcome;
}

std::string default_local_group_name(const std::string& master_address, const std::string& node,
                                     uint32_t rails) {
  // A node of one rank meets nobody: its name is its own (ranks without a node name share one).
  const std::string key = master_address + '\n' + node +
                          (rails == 1 ? fmt::format("\npid {}", getpid()) : std::string());
  std::string readable;
  for (char c : node.substr(0, 48))
    readable += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  return fmt::format("/longhaul-{}-{:016x}", readable, XXH3_64bits(key.data(), key.size()));
}

}  // namespace longhaul::node
