#include "runtime/io_runtime.hpp"

#include <algorithm>

namespace longhaul::runtime {

IoRuntime::IoRuntime(unsigned threads) : work_(asio::make_work_guard(context_)) {
  if (threads == 0) threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { context_.run(); });
}

IoRuntime::~IoRuntime() {
  work_.reset();
  context_.stop();
  for (auto& t : threads_) t.join();
}

bool IoRuntime::in_runtime_thread() const {
  const auto self = std::this_thread::get_id();
  return std::any_of(threads_.begin(), threads_.end(),
                     [&](const std::thread& t) { return t.get_id() == self; });
}

}  // namespace longhaul::runtime
