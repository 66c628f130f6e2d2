// Runs a communicator's collectives: numbers operations within each epoch, starts them on the
// runtime's worker pool with scratch from a pool of buffers the operations share one after
// another, and aborts everything in flight when the master says so. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collective/allreduce.hpp"
#include "collective/buffer_pool.hpp"
#include "collective/deadline_watch.hpp"
#include "collective/gather.hpp"
#include "collective/ring_view.hpp"
#include "common/mutex.hpp"
#include "runtime/worker_pool.hpp"

namespace longhaul::collective {

class CollectiveEngine {
 public:
  // `workers` runs the reducing, encoding and decoding; it must outlive the engine.
  explicit CollectiveEngine(runtime::WorkerPool& workers);
  // Aborts every operation in flight and waits until none touches the engine any more.
  ~CollectiveEngine();
  CollectiveEngine(const CollectiveEngine&) = delete;
  CollectiveEngine& operator=(const CollectiveEngine&) = delete;

  // Starts an all-reduce (or, with spec.scatter_output, a reduce-scatter) over `view`. Every
  // member must start the group's collectives in the same order within an epoch. Invalid
  // arguments are reported here, before anything is sent.
  Result<std::shared_ptr<AllReduceOp>> allreduce(const RingView& view, const AllReduceSpec& spec);
  // Starts an all-gather (a broadcast, a barrier: gather_spec.hpp) over `view`, numbered in the
  // same sequence as the all-reduces; otherwise as allreduce().
  Result<std::shared_ptr<GatherOp>> gather(const RingView& view, const GatherSpec& spec);
  // Fails every operation in flight with `why`.
  void abort_all(const Status& why);
  // The master aborted `epoch`: fails every operation in flight on a view of that epoch or an
  // older one, and refuses (with `why`) every such operation started later, which the other
  // members will never complete because they are re-forming the ring. A refused operation still
  // takes its sequence number, and its transfers are cancelled on the view's links, so a member
  // the abort has not reached yet fails its part at once and nothing it sent is kept.
  void abort_epoch(uint64_t epoch, const Status& why);
  // Refuses new operations of `epoch` and older with `why`, leaving those in flight alone: each
  // completes or fails on the data plane, alike on every member. For a peer that lost its master
  // (peer/session.hpp): aborting its own operations in flight would end, on this member only, an
  // operation the others complete. Thread-safe.
  void close_epoch(uint64_t epoch, const Status& why);

  // Who hears when an operation's own timeout failed it (the peer asks the master to abort the
  // group's collectives of that epoch, so that members waiting for this one's part are released
  // at once, not by their own timeouts). Runs on the timeout thread; must not block. Empty: none.
  using TimeoutListener = std::function<void(uint64_t epoch, const Status& why)>;
  void set_timeout_listener(TimeoutListener listener) EXCLUDES(mu_);

  // A fault hook for tests: `gate(epoch, seq)` runs on the worker pool when an operation started
  // afterwards has done all its work and is about to succeed, and the operation's outcome is
  // decided once it returns (an abort delivered meanwhile fails it). It forces an abort to race
  // a completion at an exact point instead of by timing (tests/integration/atomic_allreduce_test).
  // Empty: none (the default).
  using SuccessGate = std::function<void(uint64_t epoch, uint64_t seq)>;
  void set_success_gate(SuccessGate gate) EXCLUDES(mu_);

  // The scratch the operations share (the batch call guards its inputs with it too).
  BufferPool& buffers() { return buffers_; }
  // Frees the scratch buffers no operation holds (they are also freed under memory pressure).
  void release_idle_buffers() { buffers_.release_idle(); }
  size_t idle_buffer_bytes() const { return buffers_.idle_bytes(); }
  // Timeouts held for operations (deadline_watch.hpp): bounded by the operations still alive.
  size_t pending_timeouts() const { return deadlines_.pending(); }

 private:
  using Factory = std::function<std::shared_ptr<Operation>(uint64_t seq)>;
  // Numbers, registers, prepares and starts the operation `make` builds, unless it must be
  // refused (the epoch was aborted, or `missing_link`).
  // An operation with a `timeout` (0: none) is failed with LH_ERR_TIMEOUT once it passes.
  // `signature`: what this member called, compared with the other members' (signature.hpp).
  Result<std::shared_ptr<Operation>> launch(const RingView& view, const Status& missing_link,
                                            std::chrono::milliseconds timeout,
                                            const Signature& signature, const Factory& make);
  // The next sequence number of `view`'s epoch. A refused operation takes its number too: the
  // members the abort has not reached yet start it under that number.
  uint64_t next_seq(const RingView& view) REQUIRES(mu_);
  // Why an operation on `view` must be refused, or OK.
  Status refusal(const RingView& view, const Status& missing_link) const REQUIRES(mu_);
  void remember(const std::shared_ptr<Operation>& op) REQUIRES(mu_);
  void abort_matching(const Status& why, const std::function<bool(const Operation&)>& which)
      EXCLUDES(mu_);

  BufferPool buffers_;
  runtime::WorkerPool& workers_;
  Mutex mu_;
  uint64_t epoch_ GUARDED_BY(mu_) = ~0ull;
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  bool aborted_ GUARDED_BY(mu_) = false;
  uint64_t aborted_epoch_ GUARDED_BY(mu_) = 0;
  Status abort_status_ GUARDED_BY(mu_);
  std::vector<std::weak_ptr<Operation>> in_flight_ GUARDED_BY(mu_);
  SuccessGate success_gate_ GUARDED_BY(mu_);
  TimeoutListener timeout_listener_ GUARDED_BY(mu_);
  // Last: destroyed first, so no deadline fires into a half-destroyed engine.
  DeadlineWatch deadlines_;
};

}  // namespace longhaul::collective
