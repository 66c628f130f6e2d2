// The collectives' own deadlines (AllReduceSpec::timeout, GatherSpec::timeout): an operation still
// running when its deadline passes is failed with LH_ERR_TIMEOUT on this member. Failing it
// cancels its transfers at both ends of its links (operation.hpp): a member that starts it later
// fails at once with LH_ERR_ABORTED, one in it when its next transfer is with this member.
//
// One thread, started with the first deadline, sleeps until the earliest one. Operations are held
// weakly: a finished or released one is simply skipped, and the released ones are pruned whenever
// the entries have doubled, so a long timeout on many short operations holds memory in proportion
// to the operations still alive, not to the calls made. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "common/mutex.hpp"
#include "common/status.hpp"

namespace longhaul::collective {

class Operation;

class DeadlineWatch {
 public:
  using Clock = std::chrono::steady_clock;

  DeadlineWatch() = default;
  // Stops the thread; deadlines not yet passed are dropped.
  ~DeadlineWatch();
  DeadlineWatch(const DeadlineWatch&) = delete;
  DeadlineWatch& operator=(const DeadlineWatch&) = delete;

  // Fails `op` with `why` at `deadline` unless it has finished by then, and then runs `expired`
  // (may be empty) on the watch's thread: it must not block.
  void watch(const std::shared_ptr<Operation>& op, Clock::time_point deadline, Status why,
             std::function<void()> expired = {}) EXCLUDES(mu_);
  // Deadlines held (passed ones leave at once; released operations' at their deadline or the next
  // pruning).
  size_t pending() const EXCLUDES(mu_);

 private:
  static constexpr size_t kPruneFloor = 1024;
  struct Entry {
    std::weak_ptr<Operation> op;
    Status why;
    std::function<void()> expired;
  };
  void run() EXCLUDES(mu_);
  // Fails the entry's operation if it still runs; outside the lock.
  static void fire(Entry& e);

  mutable Mutex mu_;
  CondVar changed_;
  std::multimap<Clock::time_point, Entry> entries_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  size_t prune_at_ GUARDED_BY(mu_) = kPruneFloor;  // entries at which released ones are dropped
  std::thread thread_;                             // started by the first watch(), under mu_
};

}  // namespace longhaul::collective
