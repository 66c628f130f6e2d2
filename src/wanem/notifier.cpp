#include "wanem/notifier.hpp"

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

namespace longhaul::wanem {
namespace {

// Removes a waiter from the list however its coroutine ends (woken, or destroyed at shutdown).
struct WaiterRegistration {
  std::list<asio::steady_timer*>& list;
  std::list<asio::steady_timer*>::iterator it;
  ~WaiterRegistration() { list.erase(it); }
};

}  // namespace

asio::awaitable<bool> Notifier::wait(Clock::time_point deadline) {
  asio::steady_timer timer(executor_, deadline);
  WaiterRegistration registration{waiters_, waiters_.insert(waiters_.end(), &timer)};
  asio::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return ec == asio::error::operation_aborted;
}

void Notifier::notify_all() {
  for (asio::steady_timer* t : waiters_) t->cancel();
}

}  // namespace longhaul::wanem
