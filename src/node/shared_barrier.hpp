// A barrier for the processes of one node, in shared memory: the step every local-group operation
// is built of (shm_local_group.hpp). Waiting blocks on a futex (no spinning), wakes to check its
// deadline and the siblings' liveness every 250 ms, and ends at once on an abort.
//
// Passing a barrier and aborting the group are decided on one word (the generation and an
// aborted bit): the last arrival commits the barrier by compare-and-swap only while the bit is
// clear, and an abort sets the bit. So for every barrier, either every party sees it passed or
// every party sees the abort: no rank returns OK from a step its sibling failed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "common/status.hpp"

namespace longhaul::node {

// The barrier's words, placed in the shared segment. All zero is the initial state.
struct SharedBarrierWords {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> state;  // barriers passed (low 31 bits) | kAbortedBit
  std::atomic<uint32_t> wakes;  // the futex word: bumped by the last arrival and by abort
  std::atomic<uint32_t> abort_claimed;
  std::atomic<int32_t> abort_code;  // set by the abort that claimed, after abort_reason
  char abort_reason[480];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "a futex word must be a plain 32-bit word in shared memory");

class SharedBarrier {
 public:
  // Returns OK while every sibling lives, or why one is known to have died.
  using LivenessCheck = std::function<Status()>;
  // How long a wait may last: the group's timeout, or no limit (a sibling may be busy with work
  // that has bounds of its own, e.g. its rail's all-reduce; aborts and deaths still end it).
  enum class Deadline { kTimeout, kNone };

  // `words` lives in the segment (for as long as this object); `parties` processes take part.
  SharedBarrier(SharedBarrierWords* words, uint32_t parties, std::chrono::milliseconds timeout,
                LivenessCheck siblings_alive);

  // Returns when all parties have arrived. Fails with the abort's status once the group was
  // aborted (by anyone, before the barrier was passed); with LH_ERR_NODE_EVICTED when a sibling
  // died and LH_ERR_TIMEOUT after the timeout, each of which also aborts the group, so the
  // siblings fail too rather than wait for the one that never comes. `step` names the wait.
  Status arrive_and_wait(const char* step, Deadline deadline = Deadline::kTimeout);

  // Aborts the group (the first abort's status is kept; later ones change nothing) and wakes
  // every waiter. Thread-safe.
  void abort(const Status& why);
  // OK, or the status the group was aborted with.
  Status aborted() const;

 private:
  static constexpr uint32_t kAbortedBit = 1u << 31;
  // Sets the aborted bit (after publishing `why` if this is the first abort) and wakes everyone;
  // the state before.
  uint32_t abort_and_wake(const Status& why);
  Status wait_past(uint32_t seen, const char* step, Deadline deadline);
  void wake_all();
  SharedBarrierWords* words_;
  uint32_t parties_;
  std::chrono::milliseconds timeout_;
  LivenessCheck siblings_alive_;
};

}  // namespace longhaul::node
