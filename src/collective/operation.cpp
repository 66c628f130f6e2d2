#include "collective/operation.hpp"

#include <utility>

#include <fmt/format.h>

namespace longhaul::collective {

namespace {
// The step of the signature transfer: no schedule reaches it (a ring of at most 256 members runs
// steps 0..254 in each phase, the direct schedule step 0 alone).
constexpr size_t kSignatureStep = kMaxRingSteps;
}  // namespace

Operation::Operation(runtime::WorkerPool& workers, RingView view, uint64_t seq, Schedule schedule,
                     const transport::Staging& staging,
                     std::shared_ptr<SegmentStaging> segment_staging)
    : view_(std::move(view)),
      seq_(seq),
      schedule_(schedule),
      workers_(workers),
      staging_(staging),
      segment_staging_(std::move(segment_staging)) {}

OpInfo Operation::info() const {
  MutexLock lock(mu_);
  return {bytes_sent_, bytes_received_, view_.size, schedule_};
}

void Operation::expect_transfers(size_t transfers) {
  MutexLock lock(mu_);
  expected_ = transfers + signature_transfers_;
}

void Operation::set_signature(const Signature& signature) {
  signature_ = signature;
  signature_bytes_ = signature.encode();
}

std::vector<size_t> Operation::signature_peers() const {
  std::vector<size_t> peers;
  if (!signature_) return peers;
  for (size_t p = 0; p < view_.size; ++p)
    if (p != view_.rank && uses_link(p) && p < view_.links.size() && view_.links[p])
      peers.push_back(p);
  return peers;
}

// The signatures go first on each link, so they reach the other end ahead of this operation's
// data. No receive is posted until every signature arrived and equals ours: data that comes first
// waits in the transport, and nothing from a member that called something else, nor anything
// derived from it, reaches a buffer. Meanwhile a watch on each link stands in for the receives not
// posted, so a cancel from a member (its own failure, or one passed on) still ends the operation.
void Operation::begin() {
  const std::vector<size_t> peers = signature_peers();
  their_signatures_.resize(view_.size);
  {
    MutexLock lock(mu_);
    signatures_due_ = peers.size();
    signature_transfers_ = 2 * peers.size();
    expected_ += signature_transfers_;
    in_flight_ += signature_transfers_;
  }
  const Tag signature_tag = tag(Phase::kReduceScatter, kSignatureStep, 0);
  std::vector<uint64_t> watches(view_.size, 0);
  for (size_t p : peers)
    watches[p] = view_.links[p]->watch_cancel(
        signature_tag.bits(), [self = shared_from_this()](Status s) { self->fail(std::move(s)); });
  bool failed;
  {
    MutexLock lock(mu_);
    failed = !failure_.is_ok();
    if (!failed) watches_ = watches;
  }
  if (failed)  // a watch found the operation cancelled already: fail() ran before they were kept
    for (size_t p : peers) view_.links[p]->unwatch(watches[p]);
  for (size_t p : peers) {
    view_.links[p]->send(signature_tag.bits(), signature_bytes_,
                         [self = shared_from_this()](Status s) { self->send_done(s, 0); });
    view_.links[p]->recv(
        signature_tag.bits(), their_signatures_[p],
        [self = shared_from_this(), p](Status s) { self->signature_arrived(s, p); });
  }
  start();
}

void Operation::signature_arrived(const Status& s, size_t peer) {
  std::optional<std::string> difference;
  if (s)
    difference = describe_difference(*signature_, Signature::decode(their_signatures_[peer]),
                                     view_.member_name(view_.rank), view_.member_name(peer));
  std::vector<HeldRecv> release;
  bool all_agree = false;
  {
    MutexLock lock(mu_);
    --in_flight_;
    if (s) ++completed_;
    all_agree = s && !difference && --signatures_due_ == 0;
    if (all_agree) release.swap(held_recvs_);
  }
  if (!s) fail(s);
  if (difference)
    fail(mismatch_error(fmt::format("the members called {} (epoch {}, number {}) differently; {}",
                                    call_name(signature_->call), view_.epoch, seq_, *difference)));
  if (all_agree) end_watches();  // the receives, posted now, are reached by cancels
  for (HeldRecv& r : release) post_recv(r.peer, r.tag, r.bytes, std::move(r.then));
  MutexLock lock(mu_);
  maybe_finish();
}

// The links are taken under the lock with the ids: the operation may complete on another thread
// meanwhile, and drop_links() then empties view_.links (it ends the watches left itself).
void Operation::end_watches() {
  std::vector<std::pair<std::shared_ptr<transport::DataLink>, uint64_t>> watched;
  {
    MutexLock lock(mu_);
    watched = take_watches();
  }
  for (auto& [link, id] : watched) link->unwatch(id);
}

std::vector<std::pair<std::shared_ptr<transport::DataLink>, uint64_t>> Operation::take_watches() {
  std::vector<std::pair<std::shared_ptr<transport::DataLink>, uint64_t>> watched;
  for (size_t p = 0; p < watches_.size(); ++p)
    if (watches_[p] != 0 && p < view_.links.size() && view_.links[p])
      watched.emplace_back(view_.links[p], watches_[p]);
  watches_.clear();
  return watched;
}

void Operation::send(size_t peer, const Tag& tag, std::span<const std::byte> bytes) {
  {
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return;
    ++in_flight_;
  }
  transport::send_from(
      view_.links[peer], tag.bits(), staging_.source(bytes),
      [self = shared_from_this(), n = bytes.size()](Status s) { self->send_done(s, n); });
}

void Operation::recv(size_t peer, const Tag& tag, std::span<std::byte> bytes,
                     std::function<void()> then) {
  {
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return;
    if (signatures_due_ > 0) {
      held_recvs_.push_back({peer, tag, bytes, std::move(then)});
      return;
    }
  }
  post_recv(peer, tag, bytes, std::move(then));
}

void Operation::post_recv(size_t peer, const Tag& tag, std::span<std::byte> bytes,
                          std::function<void()> then) {
  {
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return;
    ++in_flight_;
  }
  transport::recv_into(view_.links[peer], tag.bits(), staging_.sink(bytes),
                       [self = shared_from_this(), n = bytes.size(),
                        then = std::move(then)](Status s) { self->recv_done(s, n, then); });
}

// `bytes` 0: the signature's send, which is not the operation's payload (OpInfo counts payload).
void Operation::send_done(const Status& s, size_t bytes) {
  {
    MutexLock lock(mu_);
    --in_flight_;
    if (s) {
      bytes_sent_ += bytes;
      ++completed_;
      maybe_finish();
      return;
    }
  }
  // Link completions run outside the link's lock, so cancelling from here is safe.
  fail(s);
  MutexLock lock(mu_);
  maybe_finish();
}

void Operation::recv_done(const Status& s, size_t bytes, const std::function<void()>& then) {
  bool go_on = false;
  {
    MutexLock lock(mu_);
    --in_flight_;
    if (s) {
      bytes_received_ += bytes;
      ++completed_;
      // `then` counts as a task while it runs, so the operation cannot complete before the work
      // it hands on is counted in its turn.
      go_on = failure_.is_ok();
      if (go_on) ++tasks_;
    }
  }
  if (!s) fail(s);
  if (go_on) then();
  MutexLock lock(mu_);
  if (go_on) --tasks_;
  maybe_finish();
}

void Operation::run_task(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return;
    ++tasks_;
  }
  // Reducing, encoding and decoding run on the worker pool, never on an I/O thread.
  workers_.post([self = shared_from_this(), task = std::move(task)] {
    bool run;
    {
      MutexLock lock(self->mu_);
      run = self->failure_.is_ok();
    }
    if (run) task();
    self->task_done();
  });
}

void Operation::run_after(const std::function<void(Arrival)>& arrive, std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return;
    ++tasks_;
  }
  // The arrival may come on a thread that must not block or call back into the copy's runtime
  // (a CUDA host function): everything, the task included, goes to the worker pool.
  arrive([self = shared_from_this(), task = std::move(task)](Status s) mutable {
    self->workers_.post([self, s = std::move(s), task = std::move(task)] {
      bool run = false;
      {
        MutexLock lock(self->mu_);
        run = self->failure_.is_ok();
      }
      if (!s)
        self->fail(s);
      else if (run)
        task();
      self->task_done();
    });
  });
}

Operation::Arrival Operation::hold() {
  {
    MutexLock lock(mu_);
    ++tasks_;
  }
  return [self = shared_from_this()](Status s) {
    self->workers_.post([self, s = std::move(s)] {
      if (!s) self->fail(s);
      self->task_done();
    });
  };
}

void Operation::task_done() {
  MutexLock lock(mu_);
  --tasks_;
  maybe_finish();
}

void Operation::begin_staging(const InputPlan& input) {
  if (!segment_staging_) return;
  segment_staging_->begin(input, [weak = weak_from_this()]() -> Arrival {
    // Alive: it starts the copies.
    auto self = weak.lock();
    return self ? self->hold() : [](Status) {};
  });
}

void Operation::run_with_input(size_t chunk, size_t seg, std::function<void()> task) {
  if (!segment_staging_) return run_task(std::move(task));
  run_after(
      [this, chunk, seg](Arrival arrived) {
        segment_staging_->when_input_ready(chunk, seg, std::move(arrived));
      },
      std::move(task));
}

void Operation::result_final(size_t chunk, size_t seg, std::span<const std::byte> encoded) {
  if (segment_staging_) segment_staging_->result_final(chunk, seg, encoded);
}

void Operation::values_final(size_t chunk, size_t seg) {
  if (segment_staging_) run_task([this, chunk, seg] { result_final(chunk, seg, {}); });
}

Status Operation::run_here(const std::function<Status()>& step) {
  {
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return failure_;
    ++tasks_;
  }
  Status s = step();
  if (!s) fail(s);
  MutexLock lock(mu_);
  --tasks_;
  maybe_finish();
  return s;
}

bool Operation::fail(Status why) {
  // Their callbacks hold the operation: let go of them (after the lock).
  std::vector<HeldRecv> never_posted;
  // Taken under the lock: once failed, the operation may complete on another thread at any moment,
  // and drop_links() then empties view_.links.
  std::vector<std::shared_ptr<transport::DataLink>> used;
  {
    MutexLock lock(mu_);
    if (done_ || !failure_.is_ok()) return false;
    failure_ = why;
    never_posted.swap(held_recvs_);
    for (size_t p = 0; p < view_.size; ++p)
      if (p != view_.rank && uses_link(p) && p < view_.links.size() && view_.links[p])
        used.push_back(view_.links[p]);
  }
  end_watches();
  // Cancel every transfer of this operation, present and future, on every link it uses: the
  // other end then fails its part too, even a member still waiting for a step we never reached.
  const transport::Tag operation = tag(Phase::kReduceScatter, 0, 0).operation_bits();
  for (const auto& link : used) link->cancel_matching(operation, Tag::kOperationMask, why);
  MutexLock lock(mu_);
  maybe_finish();
  return true;
}

void Operation::finish_now() {
  MutexLock lock(mu_);
  maybe_finish();
}

void Operation::maybe_finish() {
  if (done_) return;
  if (!failure_.is_ok()) {
    if (in_flight_ > 0 || tasks_ > 0) return;
    restore();
    outcome_ = failure_;
  } else if (completed_ < expected_ || tasks_ > 0 || hold_at_success_gate()) {
    return;
  } else {
    outcome_ = commit();
  }
  done_ = true;
  release();
  done_cv_.notify_all();
}

bool Operation::hold_at_success_gate() {
  if (!success_gate_ || gate_passed_) return false;
  gate_passed_ = true;
  // Counted as a task: an abort while the gate runs waits for it, then fails the operation.
  ++tasks_;
  workers_.post([self = shared_from_this()] {
    self->success_gate_();
    self->task_done();
  });
  return true;
}

void Operation::drop_links() {
  std::vector<std::shared_ptr<transport::DataLink>> links;  // released after the lock
  std::vector<std::pair<std::shared_ptr<transport::DataLink>, uint64_t>> watched;
  {
    MutexLock lock(mu_);
    if (!done_) return;
    watched = take_watches();
    links.swap(view_.links);
  }
  for (auto& [link, id] : watched) link->unwatch(id);
}

bool Operation::test() const {
  MutexLock lock(mu_);
  return done_;
}

Status Operation::wait() {
  MutexLock lock(mu_);
  while (!done_) done_cv_.wait(mu_);
  return outcome_;
}

bool Operation::wait_until(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  while (!done_)
    if (!done_cv_.wait_until(mu_, deadline)) return done_;
  return true;
}

Status Operation::status() const {
  MutexLock lock(mu_);
  return outcome_;
}

}  // namespace longhaul::collective
