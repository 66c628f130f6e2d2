// Data-parallel training: every step each peer computes the gradients of its own batch, the group
// averages them (one all-or-nothing lh_allreduce_batch, retried over the survivors when a peer is
// lost) and every peer clips and applies the same average, so the parameters, the AdamW moments
// and the step stay bit-identical on every peer without ever being sent.
//
// Joiners: the parameters, both moments and the counters are registered as shared state. A peer
// that sees others waiting re-forms the ring between two steps; when the ring gained a member
// every member syncs the state (the joiner receives it) before the next all-reduce, and the group
// agrees that the sync worked everywhere before going on.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>

#include "sync_method.hpp"

namespace longhaul::train::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Attempts of one all-reduce batch before the step re-forms the ring itself and tries again.
constexpr std::uint32_t kBatchAttempts = 3;

class DataParallel final : public SyncMethod {
 public:
  DataParallel(const Options& o, PeerGroup& group) : o_(o), group_(group) {
    lh_allreduce_options_init(&allreduce_);
    allreduce_.codec = o.peer.sync.codec;
  }
  ~DataParallel() override { lh_state_destroy(state_); }

  Status start(Trainer& trainer) override;
  Result<StepStats> step(Trainer& trainer, const std::vector<std::uint8_t>& shard) override;
  Status global_parameters(Trainer& trainer, std::span<float> out) override;
  SyncCounters counters() override { return counters_; }
  Status save(const RunFiles&) override { return Status::ok(); }  // the trainer's is all of it
  Status close() override { return Status::ok(); }                // nothing travels between steps
  Result<std::uint64_t> state_hash(Trainer& trainer) override;

 private:
  Status register_state(Trainer& trainer);
  Status sync_state(Trainer& trainer);
  Status reform(Trainer& trainer);
  Status average_gradients(Trainer& trainer);
  // Runs `call`, counting its time as blocked.
  template <class F>
  lh_status blocking(F call) {
    const auto t0 = Clock::now();
    const lh_status s = call();
    counters_.blocked_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    return s;
  }

  const Options& o_;
  PeerGroup& group_;
  lh_allreduce_options allreduce_{};
  lh_state* state_ = nullptr;
  std::uint64_t shared_counters_[2] = {0, 0};  // the step, AdamW's step count
  bool receiving_ = false;                     // a joiner until its first sync succeeds
  SyncCounters counters_;
};

Status DataParallel::register_state(Trainer& trainer) {
  if (lh_status s = lh_state_create(&state_); s != LH_OK)
    return Status(s, std::string("creating the shared state: ") + lh_last_error());
  const struct {
    const char* name;
    std::span<float> data;
  } tensors[] = {{"dp.params", trainer.model().params()},
                 {"dp.adam_m", trainer.optimizer().m()},
                 {"dp.adam_v", trainer.optimizer().v()}};
  for (const auto& t : tensors)
    if (lh_status s =
            lh_state_add_tensor(state_, t.name, t.data.data(), t.data.size(), LH_DTYPE_F32);
        s != LH_OK)
      return Status(s, std::string("shared state: ") + lh_state_last_error(state_));
  if (lh_status s = lh_state_add_tensor(state_, "dp.counters", shared_counters_, 2, LH_DTYPE_U64);
      s != LH_OK)
    return Status(s, std::string("shared state: ") + lh_state_last_error(state_));
  return Status::ok();
}

Status DataParallel::start(Trainer& trainer) {
  LH_RETURN_IF_ERROR(register_state(trainer));
  receiving_ = o_.peer.join;
  const std::int64_t before = trainer.step_count();
  LH_RETURN_IF_ERROR(sync_state(trainer));
  if (trainer.step_count() != before)
    std::fprintf(stderr, "joined the group at step %lld\n",
                 static_cast<long long>(trainer.step_count()));
  return Status::ok();
}

// Every member syncs, then the group checks that it worked everywhere (a sync that failed on one
// peer, e.g. a source lost, is run again by all of them on the re-formed ring).
Status DataParallel::sync_state(Trainer& trainer) {
  for (;;) {
    shared_counters_[0] = static_cast<std::uint64_t>(trainer.step_count());
    shared_counters_[1] = static_cast<std::uint64_t>(trainer.optimizer().steps_taken());
    const lh_status synced = blocking([&] {
      return lh_sync_state(group_.comm(), state_,
                           receiving_ ? LH_SYNC_RECEIVE_ONLY : LH_SYNC_ENFORCE_POPULAR, nullptr);
    });
    if (synced != LH_OK && !retryable(synced)) return group_.error(synced, "syncing the state");
    float ok = synced == LH_OK ? 1.0f : 0.0f;
    const lh_status agreed = blocking([&] {
      return lh_allreduce_batch(group_.comm(), std::array<const void*, 1>{&ok}.data(),
                                std::array<void*, 1>{&ok}.data(), std::array<size_t, 1>{1}.data(),
                                1, LH_DTYPE_F32, LH_OP_MIN, nullptr, kBatchAttempts);
    });
    if (agreed != LH_OK && !retryable(agreed)) return group_.error(agreed, "agreeing on a sync");
    if (agreed == LH_OK && ok == 1.0f) break;
    if (lh_status s = blocking([&] { return lh_comm_update_topology(group_.comm()); }); s != LH_OK)
      return group_.error(s, "re-forming the ring");
  }
  receiving_ = false;
  // Counters that came with the group's state (a joiner's; a peer outvoted at the start) are
  // the group's step, at a step boundary: the next batch is the one of that step. A member in
  // step with the group keeps its own (it may sync between a step's gradients and its update).
  const auto step = static_cast<std::int64_t>(shared_counters_[0]);
  const auto adam_steps = static_cast<std::int64_t>(shared_counters_[1]);
  if (step != trainer.step_count() || adam_steps != trainer.optimizer().steps_taken()) {
    trainer.restore_counters(step, static_cast<std::uint64_t>(step));
    trainer.optimizer().set_steps_taken(adam_steps);
  }
  return Status::ok();
}

// Admits the peers waiting to join (and drops lost ones); a ring that gained a member syncs.
Status DataParallel::reform(Trainer& trainer) {
  const std::vector<std::uint64_t> before = group_.ring();
  if (lh_status s = blocking([&] { return lh_comm_update_topology(group_.comm()); }); s != LH_OK)
    return group_.error(s, "re-forming the ring");
  for (std::uint64_t id : group_.ring())
    if (std::find(before.begin(), before.end(), id) == before.end()) return sync_state(trainer);
  return Status::ok();
}

Status DataParallel::average_gradients(Trainer& trainer) {
  std::span<float> g = trainer.model().grads();
  const void* sends[] = {g.data()};
  void* recvs[] = {g.data()};
  const size_t counts[] = {g.size()};
  for (;;) {
    const lh_traffic t0 = group_.traffic();
    const lh_status s = blocking([&] {
      return lh_allreduce_batch(group_.comm(), sends, recvs, counts, 1, LH_DTYPE_F32, LH_OP_AVG,
                                &allreduce_, kBatchAttempts);
    });
    const lh_traffic t1 = group_.traffic();
    counters_.peak_event_bytes =
        std::max(counters_.peak_event_bytes,
                 t1.data_sent - t0.data_sent + t1.data_received - t0.data_received);
    if (s == LH_OK) {
      ++counters_.rounds_applied;
      return Status::ok();
    }
    if (!retryable(s))
      return group_.error(
          s, "averaging the gradients of step " + std::to_string(trainer.step_count() + 1));
    // The batch failed on every attempt (the group kept changing): the inputs are intact; re-form
    // the ring (a joiner admitted here is synced first) and run it again.
    ++counters_.retries;
    LH_RETURN_IF_ERROR(reform(trainer));
  }
}

Result<StepStats> DataParallel::step(Trainer& trainer, const std::vector<std::uint8_t>& shard) {
  int pending = 0;
  (void)lh_comm_are_peers_pending(group_.comm(), &pending);
  if (pending) LH_RETURN_IF_ERROR(reform(trainer));
  Result<float> loss = trainer.compute_gradients(shard);
  if (!loss) return loss.status();
  LH_RETURN_IF_ERROR(average_gradients(trainer));
  return trainer.apply_gradients();
}

Status DataParallel::global_parameters(Trainer& trainer, std::span<float> out) {
  std::span<const float> p = trainer.model().params();
  std::copy(p.begin(), p.end(), out.begin());
  return Status::ok();
}

Result<std::uint64_t> DataParallel::state_hash(Trainer& trainer) {
  shared_counters_[0] = static_cast<std::uint64_t>(trainer.step_count());
  shared_counters_[1] = static_cast<std::uint64_t>(trainer.optimizer().steps_taken());
  std::uint64_t hash = 0;
  if (lh_status s = lh_state_hash(state_, &hash); s != LH_OK)
    return Status(s, std::string("hashing the state: ") + lh_state_last_error(state_));
  return hash;
}

}  // namespace

std::unique_ptr<SyncMethod> make_data_parallel(const Options& o, PeerGroup& group) {
  return std::make_unique<DataParallel>(o, group);
}

}  // namespace longhaul::train::cli
