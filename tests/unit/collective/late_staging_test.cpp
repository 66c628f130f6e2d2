// Every schedule with sources and sinks that become ready late, on another thread, as a
// device-to-host copy would make them: the results are the same bits as with host memory, and a
// member dying while transfers wait for their bytes still fails everyone and restores the inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>

#include <asio/steady_timer.hpp>

#include "collective/engine.hpp"
#include "group_fixture.hpp"
#include "test_values.hpp"

namespace longhaul::collective {
namespace {

using quant::Codec;
using testing::InProcessGroup;
using testing::LinkThreads;
using testing::Members;

// Readiness after 0-199 µs, on one of its own threads.
class LateStaging final : public transport::Staging {
 public:
  std::shared_ptr<transport::Source> source(std::span<const std::byte> bytes) const override {
    return std::make_shared<LateSource>(*this, bytes);
  }
  std::shared_ptr<transport::Sink> sink(std::span<std::byte> bytes) const override {
    return std::make_shared<LateSink>(*this, bytes);
  }
  size_t delays() const { return delays_.load(); }

 private:
  template <class Then>
  void later(Then then) const {
    const auto delay = std::chrono::microseconds((delays_.fetch_add(1) * 7919) % 200);
    auto timer = std::make_shared<asio::steady_timer>(threads_.executor(), delay);
    timer->async_wait([timer, then = std::move(then)](std::error_code) mutable { then(); });
  }

  struct LateSource final : transport::Source {
    LateSource(const LateStaging& s, std::span<const std::byte> b) : staging(s), bytes(b) {}
    void when_ready(Ready ready) override {
      staging.later([ready = std::move(ready), b = bytes] { ready(b); });
    }
    const LateStaging& staging;
    std::span<const std::byte> bytes;
  };

  struct LateSink final : transport::Sink {
    LateSink(const LateStaging& s, std::span<std::byte> b) : staging(s), bytes(b) {}
    void when_ready(Ready ready) override {
      staging.later([ready = std::move(ready), b = bytes] { ready(b); });
    }
    void land(Status how, transport::Completion done) override {
      staging.later([how = std::move(how), done = std::move(done)] { done(how); });
    }
    const LateStaging& staging;
    std::span<std::byte> bytes;
  };

  mutable LinkThreads threads_{2};
  mutable std::atomic<size_t> delays_{0};
};

using Case = testing::ScheduleCase;

class LateStagingRuns : public ::testing::TestWithParam<Case> {};

TEST_P(LateStagingRuns, GiveTheSameBitsAsHostMemory) {
  const Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.members));
  std::uniform_real_distribution<float> value(-10.0f, 10.0f);
  std::vector<std::vector<float>> data(c.members, std::vector<float>(5003));
  for (auto& d : data)
    for (float& x : d) x = value(rng);
  LateStaging late;
  const auto host = testing::allreduce_in_place(c, data);
  const auto delayed = testing::allreduce_in_place(c, data, &late);
  EXPECT_GT(late.delays(), 0u);
  for (size_t r = 0; r < c.members; ++r) {
    EXPECT_EQ(std::memcmp(delayed[r].data(), host[r].data(), host[r].size() * 4), 0)
        << "member " << r;
    EXPECT_EQ(std::memcmp(delayed[r].data(), delayed[0].data(), host[r].size() * 4), 0)
        << "member " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, LateStagingRuns, ::testing::ValuesIn(testing::schedule_cases()),
                         testing::schedule_case_name);

TEST(LateStaging, AMemberDyingWhileBytesAreNotReadyFailsEveryoneAndRestoresInputs) {
  for (Schedule schedule : {Schedule::kRing, Schedule::kDirect}) {
    const size_t n = 3;
    LateStaging late;
    InProcessGroup group(n);
    std::vector<std::vector<float>> data(n, std::vector<float>(1 << 18, 2.0f));
    const auto original = data;
    Members members(n);  // after the buffers: its engines end their operations first
    std::vector<std::shared_ptr<AllReduceOp>> ops;
    for (size_t r = 0; r < n; ++r) {
      AllReduceSpec spec;
      spec.input = spec.output = data[r].data();
      spec.count = data[r].size();
      spec.schedule = schedule;
      spec.segment_bytes = 4096;
      spec.staging = &late;
      auto op = members.engines[r]->allreduce(group.view(r), spec);
      ASSERT_TRUE(op.is_ok()) << op.status().to_string();
      ops.push_back(*op);
    }
    group.kill(1);
    for (size_t r = 0; r < n; ++r) {
      const Status s = ops[r]->wait();
      EXPECT_TRUE(s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED) << s.to_string();
      EXPECT_TRUE(data[r] == original[r]) << schedule_name(schedule) << " member " << r;
    }
  }
}

}  // namespace
}  // namespace longhaul::collective
