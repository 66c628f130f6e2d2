// All-reduce over a group's ring: chunked, pipelined, striped, optionally quantized, bit-exact.
//
// Two schedules move the same bytes per member:
// - ring: reduce-scatter in N-1 ring steps, then all-gather in N-1 ring steps. Each segment runs
//   its own chain of steps, so sending, receiving and reducing of different segments overlap.
// - direct: reduce-scatter as an all-to-all (each member sends chunk c straight to its owner, who
//   combines every contribution in a fixed order), then the owner sends the result to everyone.
//   One step; a quantized contribution is encoded exactly once.
//
// Bit parity: every chunk is combined along one path and its owner's final bytes are what every
// member, the owner included, ends with. With a codec the owner encodes the final chunk once and
// every member decodes those same bytes.
//
// Failure: the first error (a link failing, a cancel, abort()) cancels every transfer the
// operation has outstanding, on both ends of each link, and the operation completes with that
// error once no transfer touches its buffers any more. The input is then intact (an in-place
// operation restores every segment it had touched from a copy taken at that first touch, unless
// the caller waived that with restore_input = false), the error-feedback residual is restored,
// and the output holds unspecified values.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <asio/thread_pool.hpp>

#include "collective/buffer_pool.hpp"
#include "collective/partition.hpp"
#include "collective/ring_view.hpp"
#include "common/status.hpp"
#include "quant/codec.hpp"
#include "quant/dtype.hpp"

namespace longhaul::collective {

enum class Schedule : uint8_t { kAuto = 0, kRing = 1, kDirect = 2 };
const char* schedule_name(Schedule s);

struct AllReduceSpec {
  const void* input = nullptr;  // count elements of dtype; may equal output (in place)
  void* output = nullptr;
  size_t count = 0;
  quant::DType dtype = quant::DType::kF32;
  quant::ReduceOp op = quant::ReduceOp::kSum;
  // Codecs other than kNone need dtype f32.
  quant::Codec codec = quant::Codec::kNone;
  size_t block = quant::kDefaultBlock;
  // Error feedback (codec != kNone): `count` floats carried from call to call; may be null.
  float* residual = nullptr;
  Schedule schedule = Schedule::kAuto;
  // Pipeline granularity: the unencoded bytes of one segment.
  size_t segment_bytes = 1u << 20;
  // In place only: keep a copy of every segment before overwriting it, so a failed operation
  // gives the caller its input back. Costs one streaming copy of the buffer per operation and as
  // much pooled scratch; a caller that never retries with the same input can waive it (the
  // buffer then holds unspecified values after a failure, as with gloo or NCCL).
  bool restore_input = true;
};

struct AllReduceInfo {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  size_t world_size = 0;  // members the operation ran with
  Schedule schedule = Schedule::kRing;
};

class AllReduceOp : public std::enable_shared_from_this<AllReduceOp> {
 public:
  ~AllReduceOp();
  // True once the operation has completed (successfully or not).
  bool test() const;
  // Blocks until completion; returns the outcome.
  Status wait();
  // The outcome, or LH_OK while still running.
  Status status() const;
  AllReduceInfo info() const;
  // The epoch of the view it runs on.
  uint64_t epoch() const { return view_.epoch; }
  // Fails the operation with `why` (no-op once complete).
  void abort(Status why);

 private:
  friend class CollectiveEngine;
  AllReduceOp(asio::thread_pool& pool, BufferPool& buffers, RingView view, AllReduceSpec spec,
              uint64_t seq, Schedule schedule);
  Status prepare();
  void start();
  void start_ring();
  void start_direct();
  void ring_first_send(size_t seg);
  void ring_reduce_scatter_received(size_t step, size_t seg);
  void ring_all_gather_received(size_t step, size_t seg);
  void direct_first_send(size_t peer, size_t seg);
  void direct_combine(size_t seg);
  void finish_owned_segment(size_t chunk, size_t seg, std::span<std::byte> encoded_final);
  // The first touch of the output's segment: copies the input there (out of place) or keeps the
  // original for a restore on failure (in place). Each segment has one designated first toucher.
  void prepare_segment(size_t chunk, size_t seg);
  bool claim_segment(size_t chunk, size_t seg);  // true once per segment: the caller copies
  void first_touch(size_t begin, size_t count);  // the copy of prepare_segment, for a range
  // Unencoded combining of `incoming` (each the segment's bytes, in order) into the output, with
  // the first-touch copy and, when `finish`, the average fused in, piece by piece. f16/bf16 sums
  // and averages are carried in f32 and rounded once per call.
  void combine_unencoded(size_t chunk, size_t seg, std::span<const std::byte* const> incoming,
                         bool finish);
  void restore_input();  // requires mu_, nothing in flight

  void send(size_t peer, Phase phase, size_t step, size_t seg, std::span<const std::byte> data);
  // `then` runs on the link's I/O thread once the bytes have arrived: it must be cheap (a send,
  // a counter) and hand computation to run_task().
  void recv(size_t peer, Phase phase, size_t step, size_t seg, std::span<std::byte> dst,
            std::function<void()> then);
  // Runs `task` on the worker pool unless the operation has failed by then.
  void run_task(std::function<void()> task);
  // Counts one arrival at segment `seg`'s reduce-scatter gate; true for the second arrival of a
  // step (its data is in and the previous step's task has finished), which may then run.
  bool pass_gate(size_t seg);
  void fail(Status why);
  void maybe_finish();   // requires mu_
  void check(Status s);  // fails the op on error

  std::byte* work(size_t chunk, size_t seg) const;
  std::span<std::byte> work_span(size_t chunk, size_t seg) const;
  std::span<float> work_f32(size_t chunk, size_t seg) const;
  size_t encoded_bytes(size_t chunk, size_t seg) const;
  // Slot i of the scratch arena, `bytes` long (see the layout in the .cpp).
  std::span<std::byte> slot(size_t i, size_t bytes) const;
  size_t peer_index(size_t peer) const {
    return (peer + n_ - rank_ - 1) % n_;
  }  // 0..n-2 for peer != rank

  asio::thread_pool& pool_;
  BufferPool& buffers_;
  const RingView view_;
  const AllReduceSpec spec_;
  const uint64_t seq_;
  const Schedule schedule_;
  const size_t n_;
  const size_t rank_;
  const size_t elem_;
  const bool in_place_;
  const bool keep_backup_;  // in place and restore_input
  const bool encoded_;
  Partition part_;
  // Pooled scratch; handed back to the pool as soon as the operation completes.
  BufferPool::Buffer backup_;  // in place: the original of every segment prepared so far
  BufferPool::Buffer residual_backup_;
  BufferPool::Buffer arena_;  // the slots of bytes in flight
  size_t slot_bytes_ = 0;
  size_t rs_in_base_ = 0, ag_in_base_ = 0, out_base_ = 0, final_base_ = 0;
  std::vector<uint8_t> prepared_;  // by chunk * segments + segment; written by its first toucher
  std::vector<std::atomic<uint32_t>> gates_;
  std::vector<std::atomic<size_t>> contributions_;

  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  size_t expected_ = 0;   // transfers that make a successful operation
  size_t completed_ = 0;  // transfers done
  size_t in_flight_ = 0;  // transfers posted to a link and not completed
  size_t tasks_ = 0;      // worker tasks (and arrival callbacks) queued or running
  Status failure_;
  bool done_ = false;
  Status outcome_;
  AllReduceInfo info_;
};

// Runs collectives: owns the worker pool that reduces, encodes and decodes and the pool of
// scratch buffers the operations share one after another, numbers operations within each epoch,
// and can abort everything in flight (the master's abort push lands here). Thread-safe.
class CollectiveEngine {
 public:
  // workers == 0 sizes the pool to the machine.
  explicit CollectiveEngine(unsigned workers = 0);
  ~CollectiveEngine();

  // Starts an all-reduce over `view`. Every member must start the group's collectives in the
  // same order within an epoch. Invalid arguments are reported here, before anything is sent.
  Result<std::shared_ptr<AllReduceOp>> allreduce(const RingView& view, const AllReduceSpec& spec);
  // Fails every operation in flight with `why`.
  void abort_all(const Status& why);
  // The master aborted `epoch`: fails every operation in flight on a view of that epoch or an
  // older one, and refuses (with `why`) every such operation started later, which the other
  // members will never complete because they are re-forming the ring. A refused operation still
  // takes its sequence number, and its transfers are cancelled on the view's links, so a member
  // the abort has not reached yet fails its part at once and nothing it sent is kept.
  void abort_epoch(uint64_t epoch, const Status& why);
  // Frees the scratch buffers no operation holds (they are also freed under memory pressure).
  void release_idle_buffers() { buffers_.release_idle(); }
  size_t idle_buffer_bytes() const { return buffers_.idle_bytes(); }

 private:
  BufferPool buffers_;  // outlives pool_: workers may still return buffers while it is joined
  asio::thread_pool pool_;
  std::mutex mu_;
  uint64_t epoch_ = ~0ull;
  uint64_t next_seq_ = 0;
  bool aborted_ = false;
  uint64_t aborted_epoch_ = 0;
  Status abort_status_;

  void abort_matching(const Status& why, const std::function<bool(const AllReduceOp&)>& which);
  std::vector<std::weak_ptr<AllReduceOp>> in_flight_;
};

}  // namespace longhaul::collective
