// The core every collective operation shares: its transfers over the group's links, the work it
// hands to the worker pool, and how it ends. A schedule (ring.hpp, direct.hpp) only says which
// transfer follows which; the accounting is here.
//
// An operation succeeds once it has completed every transfer it expects and no task of it runs.
// It fails on its first error (a link failing, a transfer cancelled at either end, abort(), a
// kernel's error): it cancels every transfer of its own, present and future, on every link it
// uses, so the other end fails its part too, even a member still waiting for a step this one never
// reached; it then completes with that error once no transfer touches its buffers and no task
// runs, after restore() has put the caller's buffers back.
//
// Threads: transfers complete on the links' threads, tasks run on the runtime's worker pool, and
// the public methods are thread-safe. The operation keeps itself alive (shared_from_this) while
// anything of it is pending.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "collective/ring_view.hpp"
#include "collective/schedule.hpp"
#include "collective/segment_staging.hpp"
#include "collective/signature.hpp"
#include "collective/tag.hpp"
#include "common/mutex.hpp"
#include "common/status.hpp"
#include "runtime/worker_pool.hpp"
#include "transport/source_sink.hpp"

namespace longhaul::collective {

class Operation : public std::enable_shared_from_this<Operation> {
 public:
  virtual ~Operation() = default;
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  // True once the operation has completed (successfully or not).
  bool test() const;
  // Blocks until completion; returns the outcome. Any thread, any number of times.
  Status wait();
  // Blocks until completion or `deadline`; true once completed.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  // The outcome, or OK while still running.
  Status status() const;
  // The epoch of the view it runs on.
  uint64_t epoch() const { return view_.epoch; }
  // Fails the operation with `why` (a no-op once it has completed or failed); true when this call
  // is the one that failed it.
  bool abort(Status why) { return fail(std::move(why)); }
  // What it moved so far (final once completed), its world size and schedule.
  OpInfo info() const;
  // Once completed, lets go of the links of its view (a no-op before). The engine's destructor
  // calls it on the thread that destroys the communicator, while the runtime the links run on is
  // still alive: a caller may hold a completed operation past its communicator (lh_op_destroy
  // after lh_comm_destroy), and its links must not be the last to go, on a runtime already gone.
  void drop_links();

  // A fault hook for tests (CollectiveEngine::set_success_gate): runs once, on the worker pool,
  // when the operation has completed every transfer and task and is about to succeed; the
  // operation decides its outcome only after it returns, so an abort delivered meanwhile fails
  // it. Set before start(); empty (the default) costs one test of an empty function.
  void set_success_gate(std::function<void()> gate) { success_gate_ = std::move(gate); }

  // Takes the scratch the operation needs; the operation's failure instead when it has failed
  // already (the engine calls it once, before begin()).
  virtual Status prepare() = 0;
  // What this member called (signature.hpp). Set before begin(); without one the operation
  // exchanges none (an operation of a group of one).
  void set_signature(const Signature& signature);
  // Sends the signature to every member this operation exchanges data with, then starts the
  // schedule (start()). Its receives are posted only once each of those members' signatures
  // arrived and equals this one's; a difference fails it with LH_ERR_MISMATCH.
  void begin();

 protected:
  // `segment_staging`: where the input arrives from and the result goes, segment by segment
  // (segment_staging.hpp); null: the caller's host memory, all there at once.
  Operation(runtime::WorkerPool& workers, RingView view, uint64_t seq, Schedule schedule,
            const transport::Staging& staging, std::shared_ptr<SegmentStaging> segment_staging);

  // The tag of this operation's transfer at (phase, step, segment).
  Tag tag(Phase phase, size_t step, size_t seg) const {
    return {view_.epoch, seq_, phase, step, seg};
  }
  // A successful operation completes exactly `transfers` transfers. Set before starting.
  void expect_transfers(size_t transfers);
  // Sends `bytes` to the member at ring position `peer`.
  void send(size_t peer, const Tag& tag, std::span<const std::byte> bytes);
  // Receives into `bytes` from `peer`; `then` runs on the link's thread once they are in, unless
  // the operation has failed by then. It must be cheap (a send, a counter) and hand computation
  // to run_task(); it counts as a task while it runs.
  void recv(size_t peer, const Tag& tag, std::span<std::byte> bytes, std::function<void()> then);
  // Runs `task` on the worker pool unless the operation has failed by then.
  void run_task(std::function<void()> task);
  // Calls `arrive` with a callback that something outside the operation (a copy) calls exactly
  // once, on any thread, without blocking it: OK runs `task` on the worker pool, an error fails
  // the operation there. The wait counts as a task, so the operation cannot end while a callback
  // is still due.
  using Arrival = std::function<void(Status)>;
  void run_after(const std::function<void(Arrival)>& arrive, std::function<void()> task);
  // Counts work outside the operation that touches its buffers (a staging copy) as a task, even
  // after a failure: the operation cannot end until the returned callback has run, exactly once,
  // on any thread, with the work's outcome (an error fails the operation). The callback never
  // blocks its thread (the rest is posted to the pool).
  Arrival hold();
  // Runs `step` on this thread as a task, unless the operation has failed (then returns that
  // failure): an abort meanwhile cannot end the operation, and release its scratch, while `step`
  // takes the scratch or posts transfers into it. Returns what `step` returns; an error fails the
  // operation.
  Status run_here(const std::function<Status()>& step);

  // The segment staging, when there is one: start its input copies (each counted as a task)
  // when the schedule starts.
  void begin_staging(const InputPlan& input);
  // Runs `task`, which reads this member's input of segment `seg` of `chunk`, on the worker pool
  // once that input is in the operation's buffer (at once without a segment staging).
  void run_with_input(size_t chunk, size_t seg, std::function<void()> task);
  // The segment's output values are final: a staged result may be moved on from here.
  // `encoded`: the final bytes they are the decoding of, valid until the operation completes;
  // empty where the values themselves travelled.
  void result_final(size_t chunk, size_t seg, std::span<const std::byte> encoded);
  // result_final(chunk, seg, {}) from a link's thread (values landed in the output): posted to
  // the worker pool, since starting a device copy takes microseconds of the thread that asks.
  void values_final(size_t chunk, size_t seg);

  // True when this call set the failure (not done, not failed already).
  bool fail(Status why);
  // Completes an operation that expects no transfer.
  void finish_now();

  // Which links this operation's transfers use (cancelled on failure).
  virtual bool uses_link(size_t peer) const = 0;
  // Runs once, on failure, when nothing touches the caller's buffers any more: put them back.
  virtual void restore() = 0;
  // Runs once at completion: nothing touches the scratch any more; hand it back.
  virtual void release() = 0;
  // Posts the schedule's first transfers and tasks; the operation runs on from there.
  virtual void start() = 0;
  // Runs once on success, before release() and before any waiter wakes: the last moment to move
  // a result into the caller's buffers (an operation that must leave them untouched on failure
  // writes them only here). An error (a copy to device memory failing) becomes the outcome.
  virtual Status commit() { return Status::ok(); }

  RingView view_;  // read-only but for drop_links(), which takes its links once completed
  const uint64_t seq_;
  const Schedule schedule_;

 private:
  // A receive held back until the signatures agree.
  struct HeldRecv {
    size_t peer;
    Tag tag;
    std::span<std::byte> bytes;
    std::function<void()> then;
  };
  void post_recv(size_t peer, const Tag& tag, std::span<std::byte> bytes,
                 std::function<void()> then);
  // The members whose signatures this one's is compared with: those it has a link to and uses.
  std::vector<size_t> signature_peers() const;
  void signature_arrived(const Status& s, size_t peer);
  // The receives are posted, or the operation failed: the watches are no longer needed.
  void end_watches() EXCLUDES(mu_);
  // Empties watches_, returning each watch with its link (to unwatch after the lock).
  std::vector<std::pair<std::shared_ptr<transport::DataLink>, uint64_t>> take_watches()
      REQUIRES(mu_);
  void send_done(const Status& s, size_t bytes);
  void recv_done(const Status& s, size_t bytes, const std::function<void()>& then);
  void maybe_finish() REQUIRES(mu_);
  // Runs the success gate as a task, once: true when it did (the outcome waits for it).
  bool hold_at_success_gate() REQUIRES(mu_);
  // A task (or a held wait) has ended: the operation may complete now.
  void task_done() EXCLUDES(mu_);

  runtime::WorkerPool& workers_;
  std::function<void()> success_gate_;  // set before start(), read under mu_ afterwards
  const transport::Staging& staging_;
  const std::shared_ptr<SegmentStaging> segment_staging_;

  mutable Mutex mu_;
  CondVar done_cv_;
  size_t expected_ GUARDED_BY(mu_) = 0;   // transfers that make a successful operation
  size_t completed_ GUARDED_BY(mu_) = 0;  // transfers done
  size_t in_flight_ GUARDED_BY(mu_) = 0;  // transfers posted to a link and not completed
  size_t tasks_ GUARDED_BY(mu_) = 0;      // worker tasks (and arrival callbacks) queued or running
  uint64_t bytes_sent_ GUARDED_BY(mu_) = 0;
  uint64_t bytes_received_ GUARDED_BY(mu_) = 0;
  Status failure_ GUARDED_BY(mu_);
  bool done_ GUARDED_BY(mu_) = false;
  bool gate_passed_ GUARDED_BY(mu_) = false;
  Status outcome_ GUARDED_BY(mu_);
  // The signature exchange: ours, the others' by ring position (written by their receives before
  // `signatures_due_` counts them), how many are still due, and what waits for them (begin()).
  std::optional<Signature> signature_;
  Signature::Encoded signature_bytes_{};
  std::vector<Signature::Encoded> their_signatures_;
  size_t signatures_due_ GUARDED_BY(mu_) = 0;
  size_t signature_transfers_ GUARDED_BY(mu_) = 0;  // part of expected_
  std::vector<HeldRecv> held_recvs_ GUARDED_BY(mu_);
  // The cancel watches (DataLink::watch_cancel) by ring position while receives are held; 0: none.
  std::vector<uint64_t> watches_ GUARDED_BY(mu_);
};

}  // namespace longhaul::collective
