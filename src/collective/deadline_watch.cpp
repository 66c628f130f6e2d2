#include "collective/deadline_watch.hpp"

#include <algorithm>
#include <vector>

#include "collective/operation.hpp"

namespace longhaul::collective {

DeadlineWatch::~DeadlineWatch() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeadlineWatch::watch(const std::shared_ptr<Operation>& op, Clock::time_point deadline,
                          Status why, std::function<void()> expired) {
  bool earliest = false;
  {
    MutexLock lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    earliest = entries_.empty() || deadline < entries_.begin()->first;
    entries_.emplace(deadline, Entry{op, std::move(why), std::move(expired)});
    if (entries_.size() >= prune_at_) {
      std::erase_if(entries_, [](const auto& kv) { return kv.second.op.expired(); });
      prune_at_ = std::max(kPruneFloor, 2 * entries_.size());
    }
  }
  if (earliest) changed_.notify_all();
}

void DeadlineWatch::fire(Entry& e) {
  auto op = e.op.lock();
  // Only a deadline that failed the operation counts as expired, not one that came after its end.
  if (op && op->abort(std::move(e.why)) && e.expired) e.expired();
}

size_t DeadlineWatch::pending() const {
  MutexLock lock(mu_);
  return entries_.size();
}

void DeadlineWatch::run() {
  MutexLock lock(mu_);
  while (!stopping_) {
    if (entries_.empty()) {
      changed_.wait(mu_);
      continue;
    }
    if (Clock::now() < entries_.begin()->first) {
      changed_.wait_until(mu_, entries_.begin()->first);
      continue;
    }
    // Every deadline passed by now; failed outside the lock (a failure cancels transfers).
    std::vector<Entry> due;
    const auto now = Clock::now();
    while (!entries_.empty() && entries_.begin()->first <= now) {
      due.push_back(std::move(entries_.begin()->second));
      entries_.erase(entries_.begin());
    }
    lock.unlock();
    for (Entry& e : due) fire(e);
    lock.lock();
  }
}

}  // namespace longhaul::collective
