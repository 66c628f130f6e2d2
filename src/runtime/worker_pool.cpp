#include "runtime/worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "common/mutex.hpp"

namespace longhaul::runtime {
namespace {

size_t machine_threads(unsigned requested) {
  return requested ? requested : std::max(1u, std::thread::hardware_concurrency());
}

// Shared by the caller and the helpers it posted. The caller, once no item is left, closes the
// loop and waits only for helpers that are still running an item: a helper that starts later
// leaves without touching `body`, so a parallel_for nested inside a pool task never waits for a
// worker that is itself blocked.
struct Loop {
  const std::function<void(size_t)>* body = nullptr;
  size_t n = 0;
  std::atomic<size_t> next{0};
  Mutex mu;
  CondVar cv;
  size_t running GUARDED_BY(mu) = 0;
  bool closed GUARDED_BY(mu) = false;

  void work() {
    for (size_t i; (i = next.fetch_add(1)) < n;) (*body)(i);
  }
};

}  // namespace

WorkerPool::WorkerPool(unsigned threads)
    : threads_(machine_threads(threads)), pool_(machine_threads(threads)) {}

WorkerPool::~WorkerPool() {
  // A post from a thread outside the pool (a copy's completion) may still be signalling the
  // pool's condition variable after the task it posted ran: wait for it to return.
  while (posting_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  pool_.join();
}

void WorkerPool::parallel_for(size_t n, const std::function<void(size_t)>& body) {
  if (n == 0) return;
  // The caller is one of the threads: with one per core, threads_ - 1 helpers keep every core busy.
  const size_t helpers = std::min(n - 1, threads_ - 1);
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
  auto loop = std::make_shared<Loop>();
  loop->body = &body;
  loop->n = n;
  for (size_t h = 0; h < helpers; ++h) {
    post([loop] {
      {
        MutexLock lock(loop->mu);
        if (loop->closed) return;
        ++loop->running;
      }
      loop->work();
      MutexLock lock(loop->mu);
      if (--loop->running == 0) loop->cv.notify_all();
    });
  }
  loop->work();
  MutexLock lock(loop->mu);
  loop->closed = true;
  while (loop->running > 0) loop->cv.wait(loop->mu);
}

}  // namespace longhaul::runtime
