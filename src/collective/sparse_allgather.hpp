// The sparse all-gather (issue 48, part 2): every member contributes one byte buffer whose size may
// differ from the others' and is not declared by the caller; every member ends with every
// contribution, in ring order, with its size, bit-identical on every member. Built for the sparse
// codec's encodings (quant/sparse_codec.hpp), whose size depends on the data, but the bytes are
// opaque here.
//
// Two all-gathers of the existing machinery (gather.hpp), started one after the other through the
// member's collectives, so their properties carry over unchanged (ring or direct schedule, the
// pushed abort, the failure spreading in milliseconds, striping over each link's connections, the
// refusal of an operation after an abort or without a needed link):
//
//   1. the sizes: an all-gather of one u64 per member (8 bytes each; on the direct schedule one
//      round trip);
//   2. the contributions: an all-gather of u8 with the sizes of step 1 as its counts, into one
//      buffer this object owns (SparseGathered). Each member sends its own contribution N-1 times
//      (direct) or forwards every other contribution once (ring): (N-1) contributions per member
//      either way.
//
// Both take a sequence number of the epoch (they are two collectives in the group's order), and
// every member decides from the same sizes whether step 2 runs at all (nothing to send: every
// contribution empty, or a group of one), so the numbering stays the same on every member.
//
// Validation: an optional ContributionCheck runs once per contribution (this member's own too), on
// the worker pool, as soon as the contribution's last segment is final, overlapped with the rest of
// the transfer; the operation does not complete before every check has run. A refused
// contribution does not fail the operation (a failing member would cancel the others' transfers
// and they would see the cancel instead of the reason): every member holds the same bytes and runs
// the same deterministic check, so every member finds the same members malformed, and
// SparseGathered::refusal() names them alike everywhere. The caller (the sync engine) then leaves
// them out.
//
// Ordering (why start() and start_data() are apart): step 2's counts are step 1's results, so it
// can only start once step 1 completed; both must be numbered next to each other on every member.
// The caller must start no other collective on the communicator between start() and
// start_data(): the C API calls them back to back (its _async form waits for step 1); the sync
// engine, which owns its communicator's collectives, may start step 1 at a round's launch and
// step 2 at a later step, before anything else.
//
// Threads: start() and start_data() on one thread; test(), wait(), abort(), op() and info() are
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collective/gather.hpp"
#include "collective/ring_view.hpp"
#include "common/mutex.hpp"
#include "common/status.hpp"
#include "runtime/worker_pool.hpp"

namespace longhaul::collective {

// Whether the contribution of the member at ring position `rank` is well formed: OK, or why not.
// Must be deterministic (the same verdict on every member for the same bytes), must not block, and
// may run concurrently with itself for different members.
using ContributionCheck = std::function<Status(size_t rank, std::span<const std::byte> bytes)>;

// Starts a gathering collective over the member's committed ring: peer::Collectives::gather (or a
// test's in-process group).
using GatherStarter = std::function<Result<std::shared_ptr<GatherOp>>(const GatherSpec& spec)>;

struct SparseGatherSpec {
  // This member's contribution (may be empty). Must stay valid and unchanged until the operation
  // has completed.
  std::span<const std::byte> contribution;
  // Of both all-gathers; kAuto chooses for each as GatherSpec does (so the sizes go direct on a
  // full mesh of at most 16 members).
  Schedule schedule = Schedule::kAuto;
  // Pipeline granularity of the contributions' all-gather.
  size_t segment_bytes = 1u << 20;
  // Runs on every contribution (above). Empty: every contribution is accepted as it is.
  ContributionCheck check;
  // The most bytes all contributions together may have (0: no limit). Sizes whose sum exceeds it
  // (or overflows) fail the call with LH_ERR_PROTOCOL naming the largest contribution's member, on
  // every member alike, before anything else is sent. Every member must pass the same value.
  uint64_t max_total_bytes = 0;
  // How messages name the member at a ring position (the C API: its peer id). Must give the same
  // text on every member. Empty: "the member at ring position R".
  std::function<std::string(size_t rank)> name_member;
};

// What every member holds once the sparse all-gather succeeded: the same on every member (but
// rank()).
class SparseGathered {
 public:
  size_t members() const { return sizes_.size(); }
  // This member's ring position and the epoch the all-gather ran in.
  size_t rank() const { return rank_; }
  uint64_t epoch() const { return epoch_; }
  // Member r's contribution (ring position r) and its size in bytes.
  size_t size(size_t r) const { return sizes_[r]; }
  std::span<const std::byte> contribution(size_t r) const {
    return {bytes_.get() + offsets_[r], sizes_[r]};
  }
  // Every contribution back to back, in ring order (contribution(r) starts at offset(r)).
  std::span<const std::byte> bytes() const { return {bytes_.get(), total_}; }
  size_t offset(size_t r) const { return offsets_[r]; }
  // The check's verdict on member r's contribution: OK (also without a check), or LH_ERR_PROTOCOL
  // naming the member and the check's reason.
  const Status& verdict(size_t r) const { return verdicts_[r]; }
  // The ring positions whose contribution the check refused, in ring order.
  std::vector<size_t> malformed() const;
  // OK when no contribution was refused; else LH_ERR_PROTOCOL naming the first refused member
  // (ring position), its reason, and how many members were refused.
  Status refusal() const;

 private:
  friend class SparseAllGather;
  friend class CheckStaging;
  std::vector<size_t> sizes_;
  std::vector<size_t> offsets_;
  std::unique_ptr<std::byte[]> bytes_;
  size_t total_ = 0;
  size_t rank_ = 0;
  uint64_t epoch_ = 0;
  std::vector<Status> verdicts_;
};

class SparseAllGather {
 public:
  // Starts step 1 (the sizes) through `start_gather` and returns at once. `view`: the member's
  // ring view at the call (Collectives::ring_view()); the operation is refused when the ring the
  // sizes travel on is another one (LH_ERR_ABORTED: update the topology and retry). Errors:
  // LH_ERR_INVALID_ARGUMENT for a bad spec, and those of start_gather (nothing was started then,
  // or the started operation was cancelled at every member that started it).
  static Result<std::shared_ptr<SparseAllGather>> start(runtime::WorkerPool& workers,
                                                        const RingView& view,
                                                        GatherStarter start_gather,
                                                        SparseGatherSpec spec);
  ~SparseAllGather();
  SparseAllGather(const SparseAllGather&) = delete;
  SparseAllGather& operator=(const SparseAllGather&) = delete;

  // Whether step 1 has completed (successfully or not). Never blocks.
  bool sizes_known() const;
  // Waits for step 1, then starts step 2 (unless nothing needs to travel) and returns at once.
  // Call exactly once, before any other collective is started on the communicator. Its error is
  // also what wait() returns.
  Status start_data();
  // Whether the whole operation has completed (false until start_data() was called).
  bool test() const;
  // Blocks until both steps have completed; the outcome: OK once every contribution is here and
  // checked (a refused contribution is in result().refusal(), not here). start_data() first.
  Status wait();
  // Fails the step in flight with `why` (its usual cancel reaches every member).
  void abort(const Status& why);
  // The operation that completes last: step 2's once started, else step 1's. For the C API's
  // lh_op.
  std::shared_ptr<Operation> op() const;
  // Bytes of both steps, the world size and step 2's schedule (step 1's when step 2 did not run).
  OpInfo info() const;
  // Once the operation has completed successfully (wait() returned OK, or op() did): every
  // contribution. Null before, and after a failure.
  std::shared_ptr<const SparseGathered> result() const;

 private:
  SparseAllGather(runtime::WorkerPool& workers, GatherStarter start_gather, SparseGatherSpec spec);
  // Step 2 after a successful step 1; the error that ends the operation otherwise. `refuse`: an
  // error numbers step 2 (where the others run it) and fails it before anything is sent.
  Status start_contributions(const Status& refuse = Status::ok());
  // Step 1's sizes as the result's layout, or why they are refused (the same on every member);
  // the buffer allocated (unless *no_memory is an error already), or this member's failure to
  // allocate it in *no_memory.
  Status take_sizes(Status* no_memory);
  // The hook that checks each contribution of step 2 (`data`) once it is whole.
  std::shared_ptr<SegmentStaging> check_staging(const GatherSpec& data);
  // Runs the check on every contribution here, on this thread (no step 2: nothing travelled).
  void check_here();

  runtime::WorkerPool& workers_;
  const GatherStarter start_gather_;
  const SparseGatherSpec spec_;
  uint64_t own_size_ = 0;        // step 1's input
  std::vector<uint64_t> sizes_;  // step 1's output
  std::shared_ptr<SparseGathered> result_;
  std::shared_ptr<GatherOp> sizes_op_;  // set by start(), then read-only

  mutable Mutex mu_;
  bool data_started_ GUARDED_BY(mu_) = false;  // start_data() ran
  std::shared_ptr<GatherOp> data_op_ GUARDED_BY(mu_);
  Status outcome_ GUARDED_BY(mu_);  // start_data()'s error, when it ended the operation
};

// SparseAllGather::start and start_data back to back: the whole operation, started (waits for the
// sizes, as start_data() does).
Result<std::shared_ptr<SparseAllGather>> start_sparse_allgather(runtime::WorkerPool& workers,
                                                                const RingView& view,
                                                                GatherStarter start_gather,
                                                                SparseGatherSpec spec);

}  // namespace longhaul::collective
