// The mutex every lock in longhaul uses: std::mutex with clang's thread-safety annotations
// (common/thread_annotations.hpp), so that the clang-tsa build checks each GUARDED_BY member is
// touched only under its mutex and each REQUIRES function is called with it held.
//
//   Mutex mu_;
//   int hits_ GUARDED_BY(mu_) = 0;
//   CondVar changed_;
//
//   void hit() EXCLUDES(mu_) {
//     MutexLock lock(mu_);
//     ++hits_;
//     changed_.notify_all();
//   }
//   void wait_for_hits(int n) EXCLUDES(mu_) {
//     MutexLock lock(mu_);
//     while (hits_ < n) changed_.wait(mu_);  // the loop reads hits_ with mu_ held
//   }
//
// Waits take no predicate: a loop around wait() reads the guarded state where the analysis can see
// the mutex held (a lambda's body is checked on its own, without the caller's locks).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.hpp"

namespace longhaul {

// A std::mutex the analysis knows about. Not recursive: locking it twice on one thread deadlocks.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope, like std::unique_lock: unlock() and lock() release and take it
// again in the middle of the scope (the analysis follows both), and the destructor releases it
// only if held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// std::condition_variable over a Mutex. Every wait releases `mu` while it sleeps and holds it again
// when it returns; it may return spuriously, so callers wait in a loop on their condition.
class CondVar {
 public:
  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's lock owns it
  }
  // False once `deadline` has passed.
  template <class Clock, class Duration>
  bool wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }

  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A std::recursive_mutex the analysis knows about, for the rare lock a thread may take again while
// holding it. The analysis does not model re-entry: take it again only in another function.
class CAPABILITY("mutex") RecursiveMutex {
 public:
  RecursiveMutex() = default;
  RecursiveMutex(const RecursiveMutex&) = delete;
  RecursiveMutex& operator=(const RecursiveMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  std::recursive_mutex mu_;
};

// Holds a RecursiveMutex for its scope.
class SCOPED_CAPABILITY RecursiveMutexLock {
 public:
  explicit RecursiveMutexLock(RecursiveMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~RecursiveMutexLock() RELEASE() { mu_.unlock(); }
  RecursiveMutexLock(const RecursiveMutexLock&) = delete;
  RecursiveMutexLock& operator=(const RecursiveMutexLock&) = delete;

 private:
  RecursiveMutex& mu_;
};

}  // namespace longhaul
