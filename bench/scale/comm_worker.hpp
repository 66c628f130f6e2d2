// One communicator of the scale benchmark's driver (bench/scale/driver.cpp) and the thread that
// makes its blocking calls. lh_comm_connect, lh_comm_update_topology and lh_sync_state block until
// every member takes part, so each communicator needs a thread of its own to block in; the driver
// hands it tasks and reads back what it recorded.
//
// Between tasks the communicator "serves": the driver's poller posts an update_topology whenever
// the master's pushed peers-pending flag is set and the worker is idle (post_if_idle), as a
// training loop would at its next step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <longhaul/longhaul.h>

namespace longhaul::bench {

// CLOCK_MONOTONIC nanoseconds: the clock of every process here (Python's time.monotonic_ns()).
uint64_t now_ns();

struct WorkerOptions {
  std::string master;
  uint32_t io_threads = 1;
  size_t state_floats = 16;      // the shared-state tensor each communicator registers
  size_t allreduce_floats = 16;  // the tiny all-reduce's size
};

class CommWorker {
 public:
  // Creates the communicator (not connected) and its registry, and starts the thread.
  static lh_status create(const WorkerOptions& options, std::unique_ptr<CommWorker>* out,
                          std::string* error);
  // Stops the thread after the tasks posted so far, then destroys the communicator without a
  // graceful leave unless leave() ran.
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  void post(std::function<void()> task);
  // Posts an update_topology when the flag is set, no task is queued or running, and the
  // communicator serves.
  void serve_if_pending();

  // Tasks (they run on the worker's thread; failures land in error()).
  void connect_at(uint64_t at_ns);
  void update();
  void sync_state();
  void allreduce();
  void leave();
  // Destroys the communicator at once (an abrupt departure, as a crash looks to the master).
  void vanish();

  // What the worker recorded; read after the task that sets it completed.
  int64_t epoch() const { return epoch_.load(); }
  int64_t world() const { return world_.load(); }
  uint64_t epoch_entered_ns() const { return epoch_entered_ns_.load(); }
  uint64_t task_done_ns() const { return task_done_ns_.load(); }
  uint64_t revision() const { return revision_.load(); }
  uint64_t state_rx_bytes() const { return state_rx_bytes_.load(); }
  bool allreduce_ok() const { return allreduce_ok_.load(); }
  // The first LH_ERR_PEER_LOST abort since the last reset_abort(), 0 if none.
  uint64_t lost_abort_ns() const { return lost_abort_ns_.load(); }
  void reset_abort() { lost_abort_ns_ = 0; }
  std::string error() const;

 private:
  CommWorker() = default;
  void run();
  void fail(const char* what, lh_status s);
  void note_epoch();
  static void on_abort(void* self, uint64_t epoch, lh_status status, const char* reason);

  lh_comm* comm_ = nullptr;
  lh_state* state_ = nullptr;
  std::vector<float> tensor_;
  size_t allreduce_floats_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool running_ = false;                     // guarded by mu_: a task is executing
  bool stop_ = false;                        // guarded by mu_
  std::string error_;                        // guarded by mu_: the first failure
  std::atomic<bool> serving_{false};
  std::atomic<int64_t> epoch_{0}, world_{0};
  std::atomic<uint64_t> epoch_entered_ns_{0}, task_done_ns_{0}, lost_abort_ns_{0};
  std::atomic<uint64_t> revision_{0}, state_rx_bytes_{0};
  std::atomic<bool> allreduce_ok_{false};
};

}  // namespace longhaul::bench
