// N members in one process, every pair joined by an in-process link (no socket): the ring views a
// communicator would hand to the collective engine, the engines themselves, and the faults a test
// injects at any step.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include "collective/engine.hpp"
#include "collective/ring_view.hpp"
#include "runtime/worker_pool.hpp"
#include "transport/inproc_link.hpp"

namespace longhaul::collective::testing {

// Threads that run the links' completions, as a process's I/O threads do.
class LinkThreads {
 public:
  explicit LinkThreads(unsigned threads = 2);
  ~LinkThreads();
  asio::any_io_executor executor() { return context_.get_executor(); }

 private:
  asio::io_context context_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

class InProcessGroup {
 public:
  explicit InProcessGroup(size_t members, uint64_t epoch = 1);
  ~InProcessGroup();
  RingView view(size_t rank) const { return views_[rank]; }
  size_t size() const { return views_.size(); }
  // Member `from`'s end of its link to member `to`.
  transport::InProcessLink& link(size_t from, size_t to) const { return *ends_[from][to]; }
  // Calls f(end) for every end of every link.
  template <class F>
  void for_each_end(F&& f) const {
    for (const auto& row : ends_)
      for (const auto& end : row)
        if (end) f(*end);
  }
  // Fails every link of member `rank`, as if its process died.
  void kill(size_t rank);

 private:
  LinkThreads threads_;
  std::vector<std::vector<std::shared_ptr<transport::InProcessLink>>> ends_;
  std::vector<RingView> views_;
};

// One collective engine per member, each with its own worker thread, as separate processes have.
struct Members {
  explicit Members(size_t n);
  ~Members();
  std::vector<std::unique_ptr<runtime::WorkerPool>> pools;
  std::vector<std::unique_ptr<CollectiveEngine>> engines;
};

}  // namespace longhaul::collective::testing
