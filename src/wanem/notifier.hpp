// Lets coroutines on one single-threaded io_context sleep until another one says "something
// changed" (or a deadline passes), instead of polling. Waiters re-check their condition on waking.
#pragma once

#include <chrono>
#include <list>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

namespace longhaul::wanem {

class Notifier {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Notifier(asio::any_io_executor executor) : executor_(std::move(executor)) {}
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Suspends until notify_all() or `deadline`; true when notified, false at the deadline.
  asio::awaitable<bool> wait(Clock::time_point deadline = Clock::time_point::max());
  // Wakes every current waiter. A notification with no waiter is not remembered.
  void notify_all();

 private:
  asio::any_io_executor executor_;
  std::list<asio::steady_timer*> waiters_;
};

}  // namespace longhaul::wanem
