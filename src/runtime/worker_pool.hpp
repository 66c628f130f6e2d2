// The one pool of worker threads a process's longhaul services share: the collectives' reducing,
// encoding and decoding, the state sync's hashing and compression. Sized to the machine; idle
// workers block, nothing spins.
//
// Thread-safe. Tasks must not block on other tasks of the pool (a task that needs a parallel loop
// calls parallel_for, which works on the calling thread too and so never waits for a free worker).
// The destructor runs the tasks already posted and joins the threads: every service that posts
// here must be gone, or have waited for its own tasks, before the pool is destroyed.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <utility>

#include <asio/post.hpp>
#include <asio/thread_pool.hpp>

namespace longhaul::runtime {

class WorkerPool {
 public:
  // threads == 0 sizes the pool to the machine (one thread per hardware thread).
  explicit WorkerPool(unsigned threads = 0);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `task` on one of the workers, later. Any thread may post until the destructor starts;
  // a post still returning then (the task it posted may already have run, and let its caller go
  // on to destroy the pool) is waited for.
  template <class Task>
  void post(Task&& task) {
    posting_.fetch_add(1, std::memory_order_acq_rel);
    asio::post(pool_, std::forward<Task>(task));
    posting_.fetch_sub(1, std::memory_order_acq_rel);
  }

  // Runs body(i) for every i in [0, n), spread over the workers and the calling thread, and
  // returns when all are done. body must not throw and may run concurrently with itself. Calls
  // may nest or run concurrently from several threads, workers included.
  void parallel_for(size_t n, const std::function<void(size_t)>& body);

  size_t threads() const { return threads_; }
  // Threads a parallel_for keeps busy: the caller and threads() - 1 workers, one per core.
  size_t parallelism() const { return threads_; }

 private:
  const size_t threads_;
  std::atomic<size_t> posting_{0};  // post() calls not yet returned
  asio::thread_pool pool_;
};

}  // namespace longhaul::runtime
