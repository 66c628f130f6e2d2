// An asio::io_context driven by a fixed pool of threads. Threads block in epoll when idle; nothing
// spins.
#pragma once

#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

namespace longhaul::runtime {

class IoRuntime {
 public:
  // threads == 0 picks min(4, hardware concurrency).
  explicit IoRuntime(unsigned threads = 0);
  ~IoRuntime();  // stops the context and joins the threads
  IoRuntime(const IoRuntime&) = delete;
  IoRuntime& operator=(const IoRuntime&) = delete;

  asio::io_context& context() { return context_; }
  unsigned thread_count() const { return static_cast<unsigned>(threads_.size()); }
  // True when called from one of this runtime's threads (blocking there would deadlock).
  bool in_runtime_thread() const;

 private:
  asio::io_context context_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

}  // namespace longhaul::runtime
