// collective::SparseAllGather (sparse_allgather.hpp) over in-process links, as the sync engine will
// drive it: step 1 (the sizes) started at once, step 2 (the contributions) later; a check that
// refuses contributions alike on every member; and the ends that must never hang a member: the
// master's abort of the epoch and a member lost between the two steps, a member that drops its
// handle before step 2.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collective/sparse_allgather.hpp"
#include "group_fixture.hpp"

namespace longhaul::collective {
namespace {

using namespace std::chrono_literals;
using testing::InProcessGroup;
using testing::Members;
using Bytes = std::vector<std::byte>;

Bytes pattern(size_t member, size_t size) {
  Bytes b(size);
  std::mt19937_64 rng(77 + member);
  for (auto& x : b) x = static_cast<std::byte>(rng() & 0x7F);  // never 0xFF (see refuse_ff)
  return b;
}

// Refuses a contribution that starts with 0xFF.
Status refuse_ff(size_t, std::span<const std::byte> bytes) {
  if (!bytes.empty() && bytes[0] == std::byte{0xFF}) return protocol_error("starts with 0xFF");
  return Status::ok();
}

struct Group {
  explicit Group(size_t n) : links(n), members(n) {}
  GatherStarter starter(size_t r) {
    return [this, r](const GatherSpec& s) { return members.engines[r]->gather(links.view(r), s); };
  }
  std::shared_ptr<SparseAllGather> start(size_t r, const Bytes& data, Schedule schedule,
                                         ContributionCheck check = {}) {
    SparseGatherSpec spec;
    spec.contribution = data;
    spec.schedule = schedule;
    spec.segment_bytes = 1000;  // several segments per contribution
    spec.check = std::move(check);
    auto g = SparseAllGather::start(*members.pools[r], links.view(r), starter(r), spec);
    EXPECT_TRUE(g.is_ok()) << g.status().to_string();
    return g.is_ok() ? *g : nullptr;
  }
  // Every member starts with `bytes + r` bytes of its pattern, and every member but the last (the
  // one a test makes late, loses or drops) starts step 2 as well.
  void start_all_but_last_in_step2(size_t bytes, Schedule schedule) {
    for (size_t r = 0; r < links.size(); ++r) contributions.push_back(pattern(r, bytes + r));
    for (size_t r = 0; r < links.size(); ++r)
      handles.push_back(start(r, contributions[r], schedule));
    for (size_t r = 0; r + 1 < links.size(); ++r) ASSERT_TRUE(handles[r]->start_data().is_ok());
  }
  // Waits for every member but the last, none for longer than 10 s; `codes` gets their outcomes.
  void wait_all_but_last(std::vector<lh_status>* codes) {
    for (size_t r = 0; r + 1 < handles.size(); ++r) {
      auto waited = std::async(std::launch::async, [&, r] { return handles[r]->wait(); });
      ASSERT_EQ(waited.wait_for(10s), std::future_status::ready) << "member " << r << " hangs";
      codes->push_back(waited.get().code());
    }
  }
  InProcessGroup links;
  Members members;
  std::vector<Bytes> contributions;
  std::vector<std::shared_ptr<SparseAllGather>> handles;
};

class SparseAllGatherSteps : public ::testing::TestWithParam<Schedule> {};

// Step 1 everywhere, then (once the sizes are known) step 2 everywhere: every member holds every
// contribution, the same bytes; the check's verdicts are the same on every member.
TEST_P(SparseAllGatherSteps, StartedInTwoStepsEveryMemberHoldsEveryContribution) {
  constexpr size_t kN = 5;
  Group group(kN);
  std::vector<Bytes> data{pattern(0, 4321), pattern(1, 0), pattern(2, 1), pattern(3, 10000),
                          pattern(4, 999)};
  data[3][0] = std::byte{0xFF};  // refused by the check
  std::vector<std::shared_ptr<SparseAllGather>> g;
  for (size_t r = 0; r < kN; ++r) g.push_back(group.start(r, data[r], GetParam(), refuse_ff));
  for (auto& x : g) ASSERT_NE(x, nullptr);
  // Nothing else is started in between; the engine may poll instead of blocking.
  for (size_t r = 0; r < kN; ++r) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!g[r]->sizes_known()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_FALSE(g[r]->test()) << "done before step 2 started";
    ASSERT_TRUE(g[r]->start_data().is_ok());
  }
  for (size_t r = 0; r < kN; ++r) {
    ASSERT_TRUE(g[r]->wait().is_ok());
    auto result = g[r]->result();
    ASSERT_NE(result, nullptr);
    ASSERT_EQ(result->members(), kN);
    EXPECT_EQ(result->rank(), r);
    for (size_t p = 0; p < kN; ++p) {
      EXPECT_TRUE(std::ranges::equal(result->contribution(p), data[p])) << r << " " << p;
      EXPECT_EQ(result->size(p), data[p].size());
    }
    EXPECT_EQ(result->malformed(), std::vector<size_t>{3});
    EXPECT_EQ(result->refusal().code(), LH_ERR_PROTOCOL);
    EXPECT_EQ(result->refusal().message(),
              "the contribution of the member at ring position 3 (10000 bytes) is malformed: "
              "starts with 0xFF");
    const OpInfo info = g[r]->info();
    EXPECT_EQ(info.world_size, kN);
    size_t others = 0;
    for (size_t p = 0; p < kN; ++p) others += p == r ? 0 : data[p].size();
    EXPECT_EQ(info.bytes_received, others + 8 * (kN - 1));
  }
  EXPECT_FALSE(g[0]->start_data().is_ok()) << "start_data twice";
}

// The master's abort of the epoch while step 2 waits for a member that has not started it yet:
// every member fails (aborted), including the late one, whose start_data is refused.
TEST_P(SparseAllGatherSteps, TheMastersAbortBetweenTheStepsFailsEveryMember) {
  constexpr size_t kN = 4;
  Group group(kN);
  ASSERT_NO_FATAL_FAILURE(group.start_all_but_last_in_step2(5000, GetParam()));
  auto& g = group.handles;
  std::this_thread::sleep_for(20ms);
  for (size_t r = 0; r + 1 < kN; ++r) EXPECT_FALSE(g[r]->test());
  const Status why = aborted_error("the master aborted the epoch");
  for (auto& e : group.members.engines) e->abort_epoch(group.links.view(0).epoch, why);
  for (size_t r = 0; r + 1 < kN; ++r) {
    EXPECT_EQ(g[r]->wait().code(), LH_ERR_ABORTED);
    EXPECT_EQ(g[r]->result(), nullptr);
  }
  EXPECT_EQ(g[kN - 1]->start_data().code(), LH_ERR_ABORTED);
  EXPECT_EQ(g[kN - 1]->wait().code(), LH_ERR_ABORTED);
}

// A member lost after the sizes: the others fail (peer lost), never wait for its contribution.
TEST_P(SparseAllGatherSteps, AMemberLostBetweenTheStepsFailsTheOthers) {
  constexpr size_t kN = 3;
  Group group(kN);
  ASSERT_NO_FATAL_FAILURE(group.start_all_but_last_in_step2(20000, GetParam()));
  group.links.kill(kN - 1);
  std::vector<lh_status> codes;
  ASSERT_NO_FATAL_FAILURE(group.wait_all_but_last(&codes));
  // Lost here, or the other survivor's cancel of it first.
  for (const lh_status code : codes)
    EXPECT_TRUE(code == LH_ERR_PEER_LOST || code == LH_ERR_ABORTED) << lh_status_string(code);
  (void)group.handles[kN - 1]->start_data();  // its links are gone: fails at once
}

// A member that drops its handle after step 1 (an exception skipped its start_data) still
// numbers step 2 and cancels it, so the others fail at once instead of waiting for it.
TEST_P(SparseAllGatherSteps, AHandleDroppedBeforeStep2EndsItForEveryone) {
  constexpr size_t kN = 3;
  Group group(kN);
  ASSERT_NO_FATAL_FAILURE(group.start_all_but_last_in_step2(3000, GetParam()));
  group.handles[kN - 1].reset();
  std::vector<lh_status> codes;
  ASSERT_NO_FATAL_FAILURE(group.wait_all_but_last(&codes));
  EXPECT_EQ(codes, std::vector<lh_status>(kN - 1, LH_ERR_ABORTED));
}

INSTANTIATE_TEST_SUITE_P(Schedules, SparseAllGatherSteps,
                         ::testing::Values(Schedule::kRing, Schedule::kDirect),
                         [](const auto& p) { return std::string(schedule_name(p.param)); });

}  // namespace
}  // namespace longhaul::collective
