// A collective's own timeout (AllReduceSpec::timeout, deadline_watch.hpp), on in-process links:
// the member whose timeout passes fails with LH_ERR_TIMEOUT and a member that starts the operation
// later with LH_ERR_ABORTED at once; an operation that finishes in time is left alone; and a long
// timeout on many short operations does not hold memory for each call made.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "collective/engine.hpp"
#include "group_fixture.hpp"

namespace longhaul::collective {
namespace {

using namespace std::chrono_literals;
using testing::InProcessGroup;
using testing::Members;

AllReduceSpec sum_of(std::vector<float>& values, std::chrono::milliseconds timeout) {
  AllReduceSpec spec;
  spec.input = spec.output = values.data();
  spec.count = values.size();
  spec.timeout = timeout;
  return spec;
}

TEST(CollectiveTimeout, TheTimedOutMemberGetsTimeoutAndALateOneAbortedAtOnce) {
  InProcessGroup group(2);
  Members members(2);
  std::vector<float> a(16, 1.0f), b(16, 2.0f);
  const auto t0 = std::chrono::steady_clock::now();
  auto first = members.engines[0]->allreduce(group.view(0), sum_of(a, 100ms));
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  const Status timed_out = (*first)->wait();
  EXPECT_EQ(timed_out.code(), LH_ERR_TIMEOUT) << timed_out.to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 90ms);
  EXPECT_EQ(a, std::vector<float>(16, 1.0f)) << "the input is given back";
  auto late = members.engines[1]->allreduce(group.view(1), sum_of(b, 0ms));
  ASSERT_TRUE(late.is_ok()) << late.status().to_string();
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ((*late)->wait().code(), LH_ERR_ABORTED);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 5s) << "the late member does not wait";
}

TEST(CollectiveTimeout, OperationsThatFinishInTimeAreLeftAloneAndDoNotPileUp) {
  InProcessGroup group(2);
  Members members(2);
  constexpr int kCalls = 3000;  // well past the watch's first pruning at 1024 entries
  for (int i = 0; i < kCalls; ++i) {
    std::vector<float> a(4, 1.0f), b(4, 2.0f);
    auto x = members.engines[0]->allreduce(group.view(0), sum_of(a, 600s));
    auto y = members.engines[1]->allreduce(group.view(1), sum_of(b, 600s));
    ASSERT_TRUE(x.is_ok() && y.is_ok());
    ASSERT_TRUE((*x)->wait().is_ok());
    ASSERT_TRUE((*y)->wait().is_ok());
    ASSERT_EQ(a, std::vector<float>(4, 3.0f));
  }
  for (auto& engine : members.engines) EXPECT_LE(engine->pending_timeouts(), 2048u);
}

}  // namespace
}  // namespace longhaul::collective
