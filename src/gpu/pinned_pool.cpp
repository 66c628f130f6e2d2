#include "gpu/pinned_pool.hpp"

#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "common/mutex.hpp"

namespace longhaul::gpu {

namespace {

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

class PinnedPool {
 public:
  Result<std::shared_ptr<PinnedBuffer>> acquire(std::size_t bytes) {
    free_surplus();
    PinnedBuffer slot = take_idle(bytes);
    if (slot.data() == nullptr) {
      const auto started = std::chrono::steady_clock::now();
      auto fresh = PinnedBuffer::allocate(bytes);
      if (!fresh) return fresh.status();
      slot = std::move(*fresh);
      log::debug("gpu", "pinned pool: no idle slot for {} bytes; allocating one took {:.1f} ms",
                 bytes, elapsed_ms(started));
    }
    auto* owned = new PinnedBuffer(std::move(slot));
    return std::shared_ptr<PinnedBuffer>(owned, [this](PinnedBuffer* b) {
      give_back(std::move(*b));
      delete b;
    });
  }

 private:
  PinnedBuffer take_idle(std::size_t bytes) {
    MutexLock lock(mu_);
    auto it = idle_.lower_bound(bytes);
    if (it == idle_.end() || it->first > 2 * bytes) return {};
    PinnedBuffer b = std::move(it->second);
    idle_bytes_ -= it->first;
    idle_.erase(it);
    return b;
  }

  // Never frees: a slot may come back on a CUDA callback thread (the last reference to an
  // operation dropped by a copy's host function), where no CUDA call is allowed. A slot beyond
  // the pool's bound waits for the next acquire() to free it.
  void give_back(PinnedBuffer b) {
    MutexLock lock(mu_);
    const std::size_t size = b.size();
    if (idle_bytes_ + size > kPinnedPoolBytes) {
      surplus_.push_back(std::move(b));
      return;
    }
    idle_bytes_ += size;
    idle_.emplace(size, std::move(b));
  }

  void free_surplus() {
    std::vector<PinnedBuffer> surplus;
    {
      MutexLock lock(mu_);
      surplus.swap(surplus_);
    }
  }  // freed here, outside the lock

  Mutex mu_;
  std::multimap<std::size_t, PinnedBuffer> idle_ GUARDED_BY(mu_);
  std::size_t idle_bytes_ GUARDED_BY(mu_) = 0;
  std::vector<PinnedBuffer> surplus_ GUARDED_BY(mu_);
};

PinnedPool& pool() {
  static auto* p = new PinnedPool;  // never destroyed: slots may be handed back during exit
  return *p;
}

}  // namespace

Result<std::shared_ptr<PinnedBuffer>> acquire_pinned(std::size_t bytes) {
  return pool().acquire(bytes);
}

}  // namespace longhaul::gpu
