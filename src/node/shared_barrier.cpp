#include "node/shared_barrier.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace longhaul::node {

namespace {

using Clock = std::chrono::steady_clock;

// How often a waiter wakes to look at its deadline and its siblings when nothing wakes it.
constexpr auto kCheckInterval = std::chrono::milliseconds(250);

uint32_t* futex_word(std::atomic<uint32_t>* word) {
  return reinterpret_cast<uint32_t*>(word);
}

// Sleeps while *word == expected, at most `for_at_most`. Shared between processes, so the
// futex is not FUTEX_PRIVATE. Spurious and early returns are fine: the caller looks again.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected,
                std::chrono::nanoseconds for_at_most) {
  const auto ns = std::max<int64_t>(for_at_most.count(), 0);
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  syscall(SYS_futex, futex_word(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

SharedBarrier::SharedBarrier(SharedBarrierWords* words, uint32_t parties,
                             std::chrono::milliseconds timeout, LivenessCheck siblings_alive)
    : words_(words),
      parties_(parties),
      timeout_(timeout),
      siblings_alive_(std::move(siblings_alive)) {}

Status SharedBarrier::aborted() const {
  if ((words_->state.load(std::memory_order_acquire) & kAbortedBit) == 0) return Status::ok();
  // The first aborter publishes its reason before it sets the bit; a later one may set the bit
  // first, and the reason follows within a few instructions.
  auto code = static_cast<lh_status>(words_->abort_code.load(std::memory_order_acquire));
  for (int i = 0; code == LH_OK && i < 1000; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(10));
    code = static_cast<lh_status>(words_->abort_code.load(std::memory_order_acquire));
  }
  if (code == LH_OK) return aborted_error("local group aborted");
  return Status(code, std::string(words_->abort_reason,
                                  strnlen(words_->abort_reason, sizeof words_->abort_reason)));
}

void SharedBarrier::abort(const Status& why) {
  (void)abort_and_wake(why);
}

uint32_t SharedBarrier::abort_and_wake(const Status& why) {
  const Status s = why.is_ok() ? aborted_error("local group aborted") : why;
  if (words_->abort_claimed.exchange(1, std::memory_order_acq_rel) == 0) {
    const std::string& m = s.message();
    const size_t n = std::min(m.size(), sizeof words_->abort_reason - 1);
    std::memcpy(words_->abort_reason, m.data(), n);
    words_->abort_reason[n] = '\0';
    words_->abort_code.store(static_cast<int32_t>(s.code()), std::memory_order_release);
  }
  const uint32_t before = words_->state.fetch_or(kAbortedBit, std::memory_order_acq_rel);
  wake_all();
  return before;
}

void SharedBarrier::wake_all() {
  words_->wakes.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(&words_->wakes);
}

Status SharedBarrier::arrive_and_wait(const char* step, Deadline deadline) {
  uint32_t seen = words_->state.load(std::memory_order_acquire);  // before arriving
  if (seen & kAbortedBit) return aborted();
  if (words_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
    words_->arrived.store(0, std::memory_order_relaxed);
    // Commits only while nobody has aborted: an abort that came first fails it for everyone.
    const bool passed = words_->state.compare_exchange_strong(seen, (seen + 1) & ~kAbortedBit,
                                                              std::memory_order_acq_rel);
    wake_all();
    return passed ? Status::ok() : aborted();
  }
  return wait_past(seen, step, deadline);
}

Status SharedBarrier::wait_past(uint32_t seen, const char* step, Deadline deadline) {
  const auto until =
      deadline == Deadline::kNone ? Clock::time_point::max() : Clock::now() + timeout_;
  const auto decided = [&](uint32_t state) {
    return (state & ~kAbortedBit) != seen ? Status::ok() : aborted();
  };
  for (;;) {
    // Read before looking: a wake after the looks changes it, so the futex does not sleep.
    const uint32_t wakes = words_->wakes.load(std::memory_order_acquire);
    const uint32_t state = words_->state.load(std::memory_order_acquire);
    if ((state & ~kAbortedBit) != seen || (state & kAbortedBit)) return decided(state);
    Status problem = siblings_alive_();
    const auto now = Clock::now();
    if (problem.is_ok() && now >= until)
      problem = timeout_error(fmt::format(
          "local group: a sibling rank did not reach '{}' within {} ms", step, timeout_.count()));
    // The barrier may have been passed meanwhile (a sibling that passed it may have exited
    // since): the word says which came first, the pass or this abort.
    if (!problem.is_ok()) return decided(abort_and_wake(problem));
    futex_wait(&words_->wakes, wakes, std::min<Clock::duration>(kCheckInterval, until - now));
  }
}

}  // namespace longhaul::node
