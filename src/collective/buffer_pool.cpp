#include "collective/buffer_pool.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/mutex.hpp"

namespace longhaul::collective {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr auto kPressureCheckInterval = std::chrono::milliseconds(100);

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Large buffers are whole huge pages, and asked to be backed by them: a first touch then costs
// one fault per 2 MiB instead of one per 4 KiB.
size_t capacity_for(size_t bytes) {
  return bytes >= kHugePage ? round_up(bytes, kHugePage) : round_up(bytes, kPage);
}

Result<std::byte*> map(size_t capacity) {
  void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return io_error(fmt::format("cannot map {} bytes of collective scratch: {}", capacity,
                                std::strerror(errno)));
  if (capacity >= kHugePage)
    madvise(p, capacity, MADV_HUGEPAGE);  // advice only; fine to be refused
  return static_cast<std::byte*>(p);
}

void unmap(std::byte* p, size_t capacity) {
  munmap(p, capacity);
}

// True when MemAvailable is below 1/8 of MemTotal (false if /proc/meminfo cannot be read).
bool memory_is_short() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return false;
  unsigned long long total = 0, available = 0, value = 0;
  char key[64];
  while (std::fscanf(f, "%63s %llu kB", key, &value) == 2) {
    if (std::strcmp(key, "MemTotal:") == 0)
      total = value;
    else if (std::strcmp(key, "MemAvailable:") == 0)
      available = value;
    if (total && available) break;
  }
  std::fclose(f);
  return total && available && available < total / 8;
}

}  // namespace

struct BufferPool::State {
  struct Idle {
    std::byte* data;
    uint64_t released;  // a tick, for freeing the least recently released first
  };

  explicit State(size_t max_idle_bytes) : max_idle(max_idle_bytes) {}

  Mutex mu;
  const size_t max_idle;
  bool closed GUARDED_BY(mu) = false;
  size_t idle_bytes GUARDED_BY(mu) = 0;
  uint64_t tick GUARDED_BY(mu) = 0;
  std::multimap<size_t, Idle> idle GUARDED_BY(mu);  // by capacity
  std::chrono::steady_clock::time_point last_pressure_check GUARDED_BY(mu){};
  bool short_of_memory GUARDED_BY(mu) = false;

  // Takes back a released buffer, or frees it. Returns what to unmap once the lock is released.
  std::vector<std::pair<std::byte*, size_t>> give_back(std::byte* data, size_t capacity)
      EXCLUDES(mu) {
    std::vector<std::pair<std::byte*, size_t>> to_free;
    MutexLock lock(mu);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_pressure_check >= kPressureCheckInterval) {
      last_pressure_check = now;
      short_of_memory = memory_is_short();
    }
    if (closed || short_of_memory || capacity > max_idle) {
      to_free.emplace_back(data, capacity);
      if (short_of_memory) drain(to_free);
      return to_free;
    }
    idle.emplace(capacity, Idle{data, ++tick});
    idle_bytes += capacity;
    while (idle_bytes > max_idle) {
      auto oldest = idle.begin();
      for (auto it = idle.begin(); it != idle.end(); ++it)
        if (it->second.released < oldest->second.released) oldest = it;
      to_free.emplace_back(oldest->second.data, oldest->first);
      idle_bytes -= oldest->first;
      idle.erase(oldest);
    }
    return to_free;
  }

  void drain(std::vector<std::pair<std::byte*, size_t>>& to_free) REQUIRES(mu) {
    for (auto& [capacity, buffer] : idle) to_free.emplace_back(buffer.data, capacity);
    idle.clear();
    idle_bytes = 0;
  }
};

BufferPool::Buffer::Buffer(Buffer&& other) noexcept
    : pool_(std::move(other.pool_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

BufferPool::Buffer& BufferPool::Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::move(other.pool_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

BufferPool::Buffer::~Buffer() {
  reset();
}

void BufferPool::Buffer::reset() {
  if (data_) {
    for (auto& [p, capacity] : pool_->give_back(data_, capacity_)) unmap(p, capacity);
  }
  pool_.reset();
  data_ = nullptr;
  size_ = capacity_ = 0;
}

BufferPool::BufferPool(size_t max_idle_bytes) : state_(std::make_shared<State>(max_idle_bytes)) {}

BufferPool::~BufferPool() {
  std::vector<std::pair<std::byte*, size_t>> to_free;
  {
    MutexLock lock(state_->mu);
    state_->closed = true;
    state_->drain(to_free);
  }
  for (auto& [p, capacity] : to_free) unmap(p, capacity);
}

Result<BufferPool::Buffer> BufferPool::acquire(size_t bytes) {
  Buffer b;
  if (bytes == 0) return b;
  {
    MutexLock lock(state_->mu);
    // The smallest idle buffer that fits, unless it would waste more than half of itself.
    auto it = state_->idle.lower_bound(bytes);
    if (it != state_->idle.end() && it->first / 2 <= bytes) {
      b.data_ = it->second.data;
      b.capacity_ = it->first;
      state_->idle_bytes -= it->first;
      state_->idle.erase(it);
    }
  }
  if (!b.data_) {
    const size_t capacity = capacity_for(bytes);
    auto p = map(capacity);
    if (!p.is_ok()) return p.status();
    b.data_ = *p;
    b.capacity_ = capacity;
  }
  b.pool_ = state_;
  b.size_ = bytes;
  return b;
}

void BufferPool::release_idle() {
  std::vector<std::pair<std::byte*, size_t>> to_free;
  {
    MutexLock lock(state_->mu);
    state_->drain(to_free);
  }
  for (auto& [p, capacity] : to_free) unmap(p, capacity);
}

size_t BufferPool::idle_bytes() const {
  MutexLock lock(state_->mu);
  return state_->idle_bytes;
}

}  // namespace longhaul::collective
