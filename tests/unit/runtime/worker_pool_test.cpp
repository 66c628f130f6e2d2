// The one worker pool of a runtime: parallel_for runs every index exactly once, from any thread,
// nested or not, and never waits for a worker that is itself blocked in a parallel_for.
#include "runtime/worker_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace longhaul::runtime {
namespace {

using namespace std::chrono_literals;

// Runs `f` on a thread of its own. A deadlock must fail the test rather than hang the suite, and
// its blocked threads can never be joined: report it and end the process.
void expect_returns_within(std::chrono::seconds limit, std::function<void()> f) {
  auto done = std::async(std::launch::async, std::move(f));
  if (done.wait_for(limit) == std::future_status::ready) return done.get();
  ADD_FAILURE() << "did not return within " << limit.count() << " s: deadlock";
  std::fflush(nullptr);
  std::_Exit(1);
}

// Counts calls per index; every count must end at exactly one.
struct Hits {
  explicit Hits(size_t n) : counts(n) {}
  void hit(size_t i) { counts.at(i).fetch_add(1); }
  void expect_each_once() const {
    for (size_t i = 0; i < counts.size(); ++i) ASSERT_EQ(counts[i].load(), 1) << "index " << i;
  }
  std::vector<std::atomic<int>> counts;
};

TEST(WorkerPool, IsSizedToTheMachineByDefault) {
  WorkerPool pool;
  EXPECT_EQ(pool.threads(), std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(pool.parallelism(), pool.threads()) << "the caller and threads() - 1 helpers";
  EXPECT_EQ(WorkerPool(3).threads(), 3u);
}

TEST(WorkerPool, ParallelForRunsEveryIndexExactlyOnce) {
  for (unsigned threads : {1u, 2u, 4u, 0u}) {
    WorkerPool pool(threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{10000}}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, n = " << n);
      Hits hits(n);
      pool.parallel_for(n, [&](size_t i) { hits.hit(i); });
      hits.expect_each_once();
    }
  }
}

// Every worker runs a task that calls parallel_for, whose items call parallel_for again: the
// helpers those loops post can only start once a worker is free, which none is until the loops
// end. The callers must do the work themselves and not wait for helpers that never started.
TEST(WorkerPool, NestedParallelForFromInsidePoolTasksNeverDeadlocks) {
  for (unsigned threads : {1u, 2u, 0u}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    WorkerPool pool(threads);
    const size_t tasks = 2 * pool.threads() + 1, outer = 64, inner = 16;
    Hits outer_hits(tasks * outer), inner_hits(tasks * outer * inner);
    std::mutex mu;
    std::condition_variable cv;
    size_t finished = 0;
    expect_returns_within(60s, [&] {
      for (size_t t = 0; t < tasks; ++t)
        pool.post([&, t] {
          pool.parallel_for(outer, [&](size_t i) {
            outer_hits.hit(t * outer + i);
            pool.parallel_for(inner,
                              [&](size_t j) { inner_hits.hit((t * outer + i) * inner + j); });
          });
          std::lock_guard lock(mu);
          if (++finished == tasks) cv.notify_all();
        });
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return finished == tasks; });
    });
    outer_hits.expect_each_once();
    inner_hits.expect_each_once();
  }
}

TEST(WorkerPool, ParallelForsFromSeveralThreadsAtOnceEachRunTheirOwnIndices) {
  WorkerPool pool(2);
  constexpr size_t kCallers = 4, kN = 5000;
  std::vector<Hits> hits;
  for (size_t c = 0; c < kCallers; ++c) hits.emplace_back(kN);
  expect_returns_within(60s, [&] {
    std::vector<std::thread> callers;
    for (size_t c = 0; c < kCallers; ++c)
      callers.emplace_back([&, c] { pool.parallel_for(kN, [&](size_t i) { hits[c].hit(i); }); });
    for (auto& t : callers) t.join();
  });
  for (const auto& h : hits) h.expect_each_once();
}

TEST(WorkerPool, DestructionRunsTheTasksAlreadyPosted) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(2);
    for (int i = 0; i < 100; ++i) pool.post([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace longhaul::runtime
