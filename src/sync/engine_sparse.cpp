// The engine's rounds with the sparse codec (docs/training.md, "Sparse pseudo-gradients"): this
// member's Δ encoded with error feedback at the launch, the members' encodings gathered by the
// sparse all-gather (collective/sparse_allgather.hpp), and, once the group applied the round, the
// accepted encodings summed in ring order into the staging buffer, where the outer rule takes the
// mean as it takes the all-reduce's sum.
#include <algorithm>

#include <fmt/format.h>

#include "common/log.hpp"
#include "sync/engine.hpp"
#include "sync/round.hpp"

namespace longhaul::sync {

// Encodes the staged Δ of fragment f (staging_), or stages nothing when it does not count. A
// retry's Δ is formed afresh: the residual goes back to where the first attempt found it first.
void SyncEngine::encode_staged(uint32_t f) {
  sparse_.roll_back();
  staged_encoding_ = {};
  if (staged_code_ != Contribution::kCounted) return;
  auto encoding = sparse_.encode(f, std::span(staging_).first(layout_.fragment_size(f)));
  if (!encoding) {
    // Finite values whose total with the decayed residual overflows: excluded as non-finite, as a
    // dense Δ that overflows would be (the codec changed nothing).
    log::warn("sync", "fragment {}: the sparse codec refused this peer's pseudo-gradient: {}", f,
              encoding.status().to_string());
    staged_code_ = Contribution::kNonFinite;
    return;
  }
  staged_encoding_ = *encoding;
  if (encoding_hook_) encoding_hook_(f, staged_encoding_);
}

// Step 1 of the sparse all-gather (the sizes) over the ring the masks' all-reduce was started on;
// the contributions follow from start_contributions.
Status SyncEngine::start_sparse(Round& round, const collective::RingView& view) {
  round.encoded_bytes = staged_encoding_.size();
  collective::SparseGatherSpec spec;
  spec.contribution = staged_encoding_;
  spec.check = sparse_.check(round.fragment);
  // What a member can make every other allocate: N of the largest encoding of the fragment.
  spec.max_total_bytes = sparse_.max_round_bytes(round.fragment, view.size);
  if (group_.view().epoch == view.epoch)
    spec.name_member = [ring = round.ring](size_t r) {
      return r < ring.size() ? fmt::format("peer {} at ring position {}", ring[r], r)
                             : fmt::format("the member at ring position {}", r);
    };
  auto gather = collective::SparseAllGather::start(
      workers_, view, [this](const collective::GatherSpec& s) { return collectives_.gather(s); },
      std::move(spec));
  if (!gather) return gather.status();
  round.gather = std::move(*gather);
  return Status::ok();
}

// Step 2 (the contributions) once the sizes are known, or, with `wait`, after waiting for them.
// Its error is the gather's outcome (finish_gather). The engine calls this at the start of every
// step and before it waits, and starts no other collective while a round is in flight.
void SyncEngine::start_contributions(Round& round, bool wait) {
  if (!round.gather || round.data_started) return;
  if (!wait && !round.gather->sizes_known()) return;
  round.data_started = true;
  (void)round.gather->start_data();
}

// The round's deadline over both steps: a step not done by then is aborted (its cancel reaches
// every member) and the round is late here.
void SyncEngine::wait_sparse_until(Round& round, std::chrono::steady_clock::time_point deadline) {
  collective::SparseAllGather& gather = *round.gather;
  const auto overdue = [&] {
    round.late = true;
    gather.abort(timeout_error("the round's deadline passed"));
  };
  if (auto op = gather.op(); op && !op->wait_until(deadline)) return overdue();
  start_contributions(round, /*wait=*/true);
  if (auto op = gather.op(); op && !op->wait_until(deadline)) overdue();
}

// This member's outcome of the gather: both steps completed (a refused encoding is not a failure).
Status SyncEngine::finish_gather(Round& round) {
  if (!round.gather) return Status::ok();
  start_contributions(round, /*wait=*/true);
  return round.gather->wait();
}

// Once the group decided the round: dropped, this member's residual goes back (its Δ was not
// delivered); applied, every refused encoding is marked in the summed masks (every member refuses
// the same ones, so the tally stays the same everywhere), the counted encodings are summed into
// the staging buffer in ring order, and this member's residual stays only if its own counted.
Status SyncEngine::settle_sparse(Round& round) {
  if (!sparse()) return Status::ok();
  if (!round.decided_apply) {
    sparse_.roll_back();
    return Status::ok();
  }
  const auto result = round.gather ? round.gather->result() : nullptr;
  if (!result || result->members() != round.members)
    return internal_error(fmt::format(
        "round {} of fragment {}: applied by the group without this peer's gathered encodings",
        round.number, round.fragment));
  const std::span<float> masks = std::span(round.masks).first(2 * round.members);
  for (size_t r = 0; r < round.members; ++r) {
    const bool counted = code_of(masks, r) == Contribution::kCounted;
    // A member counted with nothing sent is as malformed as a bad encoding (the same everywhere).
    const bool empty = counted && result->size(r) == 0;
    if (empty)
      log::warn("sync", "round {} of fragment {}: peer {} was counted but sent no encoding",
                round.number, round.fragment, r < round.ring.size() ? round.ring[r] : 0);
    if (!result->verdict(r).is_ok() || empty) mark_malformed(masks, r);
  }
  if (Status refused = result->refusal(); !refused.is_ok())
    log::warn("sync", "round {} of fragment {}: {}; left out of the mean", round.number,
              round.fragment, refused.message());
  std::fill(round.delta.begin(), round.delta.end(), 0.0f);
  for (size_t r = 0; r < round.members; ++r) {
    if (code_of(masks, r) != Contribution::kCounted) continue;
    if (Status s = quant::sparse::decode_accumulate(result->contribution(r), round.delta); !s)
      return internal_error(fmt::format("round {} of fragment {}: an accepted encoding: {}",
                                        round.number, round.fragment, s.to_string()));
  }
  if (code_of(masks, result->rank()) == Contribution::kCounted)
    sparse_.commit();
  else
    sparse_.roll_back();
  return Status::ok();
}

}  // namespace longhaul::sync
