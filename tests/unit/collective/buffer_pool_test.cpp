#include "collective/buffer_pool.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

namespace longhaul::collective {
namespace {

TEST(BufferPool, AReleasedBufferIsHandedOutAgainWarm) {
  BufferPool pool;
  auto a = pool.acquire(3 << 20);
  ASSERT_TRUE(a.is_ok());
  std::byte* first = a->data();
  std::memset(first, 0x5a, a->size());
  a->reset();
  EXPECT_GE(pool.idle_bytes(), size_t{3} << 20);
  auto b = pool.acquire(3 << 20);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->data(), first);
  EXPECT_EQ(pool.idle_bytes(), 0u);
}

TEST(BufferPool, BuffersHeldAtOnceNeverShareMemory) {
  BufferPool pool;
  std::vector<BufferPool::Buffer> held;
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < 8; ++i) {
      auto b = pool.acquire((i + 1) << 16);
      ASSERT_TRUE(b.is_ok());
      held.push_back(std::move(*b));
    }
    std::set<std::pair<std::byte*, std::byte*>> ranges;
    for (auto& b : held) {
      for (auto& [lo, hi] : ranges)
        EXPECT_TRUE(b.data() + b.size() <= lo || hi <= b.data()) << "overlap";
      ranges.emplace(b.data(), b.data() + b.size());
    }
    held.resize(4);  // give half back; the next round reuses some of them
  }
}

TEST(BufferPool, ASmallRequestDoesNotTakeAMuchLargerBuffer) {
  BufferPool pool;
  auto big = pool.acquire(8 << 20);
  ASSERT_TRUE(big.is_ok());
  std::byte* p = big->data();
  big->reset();
  auto small = pool.acquire(1 << 20);
  ASSERT_TRUE(small.is_ok());
  EXPECT_NE(small->data(), p);
  EXPECT_EQ(pool.idle_bytes(), size_t{8} << 20);  // still there for a request its size
}

TEST(BufferPool, IdleBytesStayWithinTheBoundAndCanBeReleased) {
  BufferPool pool(size_t{6} << 20);
  {
    auto a = pool.acquire(4 << 20);
    auto b = pool.acquire(4 << 20);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
  }  // both released: only one fits under the bound
  EXPECT_LE(pool.idle_bytes(), size_t{6} << 20);
  EXPECT_GT(pool.idle_bytes(), 0u);
  pool.release_idle();
  EXPECT_EQ(pool.idle_bytes(), 0u);
}

TEST(BufferPool, ABufferMayOutliveItsPool) {
  BufferPool::Buffer survivor;
  {
    BufferPool pool;
    auto b = pool.acquire(1 << 20);
    ASSERT_TRUE(b.is_ok());
    survivor = std::move(*b);
  }
  std::memset(survivor.data(), 1, survivor.size());  // still mapped; freed when reset
  survivor.reset();
  EXPECT_FALSE(survivor);
}

}  // namespace
}  // namespace longhaul::collective
