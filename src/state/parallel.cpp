#include "state/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace longhaul::state {
namespace {

// A fixed set of worker threads taking jobs from one queue; lives for the whole process.
class Pool {
 public:
  Pool() {
    const size_t n = std::max<size_t>(1, std::thread::hardware_concurrency()) - 1;
    for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  size_t workers() const { return threads_.size(); }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

// Shared by the caller and the helpers it posted. The caller, once no item is left, closes the
// loop and waits only for helpers that are still running an item: a helper that starts later
// leaves without touching `body`, so a parallel_for nested inside a pool job never waits for a
// worker that is itself blocked.
struct Loop {
  const std::function<void(size_t)>* body = nullptr;
  size_t n = 0;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  size_t running = 0;
  bool closed = false;
  void work() {
    for (size_t i; (i = next.fetch_add(1)) < n;) (*body)(i);
  }
};

}  // namespace

size_t parallelism() {
  return pool().workers() + 1;
}

void parallel_for(size_t n, const std::function<void(size_t)>& body) {
  if (n == 0) return;
  const size_t helpers = std::min(n - 1, pool().workers());
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
  auto loop = std::make_shared<Loop>();
  loop->body = &body;
  loop->n = n;
  for (size_t h = 0; h < helpers; ++h) {
    pool().post([loop] {
      {
        std::lock_guard lock(loop->mu);
        if (loop->closed) return;
        ++loop->running;
      }
      loop->work();
      std::lock_guard lock(loop->mu);
      if (--loop->running == 0) loop->cv.notify_all();
    });
  }
  loop->work();
  std::unique_lock lock(loop->mu);
  loop->closed = true;
  loop->cv.wait(lock, [&] { return loop->running == 0; });
}

}  // namespace longhaul::state
