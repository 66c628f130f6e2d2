// The batch call (peer/batch.hpp) on every member of a fake group: all or nothing, the inputs as
// they were after a failed attempt, retries over a re-formed ring, and no joiner let in by them.
#include "peer/batch.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "fake_group.hpp"

namespace longhaul::peer {
namespace {

using testing::FakeMember;
using testing::FakeWorld;
using testing::in_parallel;

const std::vector<size_t> kCounts{1000, 17, 4096};

// Member i's buffers: item k holds kCounts[k] floats of value (i + 1)·(k + 1), summed in place
// or into `out`.
struct Buffers {
  std::vector<std::vector<float>> in, out;
  std::vector<BatchItem> items;

  Buffers(size_t i, bool in_place) {
    for (size_t k = 0; k < kCounts.size(); ++k) {
      in.emplace_back(kCounts[k], static_cast<float>((i + 1) * (k + 1)));
      out.emplace_back(in_place ? 0 : kCounts[k], -1.0f);
    }
    for (size_t k = 0; k < kCounts.size(); ++k)
      items.push_back({in[k].data(), in_place ? in[k].data() : out[k].data(), kCounts[k]});
  }
  // Whether every item's result holds `sum`·(k + 1).
  bool holds(float sum) const {
    for (size_t k = 0; k < kCounts.size(); ++k) {
      const auto& r = out[k].empty() ? in[k] : out[k];
      if (r != std::vector<float>(kCounts[k], sum * static_cast<float>(k + 1))) return false;
    }
    return true;
  }
};

// Runs the batch on every member at once; each member's status.
std::vector<Status> batch_all(const std::vector<FakeMember*>& m, std::vector<Buffers>& buffers,
                              uint32_t max_attempts) {
  std::vector<Status> out(m.size());
  in_parallel(m.size(), [&](size_t i) {
    out[i] = allreduce_batch(*m[i], *m[i], buffers[i].items, {}, max_attempts);
  });
  return out;
}

std::vector<Buffers> buffers_of(size_t n, bool in_place) {
  std::vector<Buffers> b;
  for (size_t i = 0; i < n; ++i) b.emplace_back(i, in_place);
  return b;
}

TEST(BatchFake, EveryItemIsSummedOnEveryMember) {
  FakeWorld world;
  auto m = world.form(3);
  auto b = buffers_of(3, /*in_place=*/false);
  auto s = batch_all(m, b, 1);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(s[i]) << s[i].to_string();
    EXPECT_TRUE(b[i].holds(6.0f)) << "member " << i;
    EXPECT_EQ(b[i].in[0][0], static_cast<float>(i + 1));  // inputs untouched
  }
  EXPECT_EQ(world.decisions(true), 1u);
}

TEST(BatchFake, SeveralBatchesInOneEpochAreDecidedOneByOne) {
  FakeWorld world;
  auto m = world.form(2);
  for (int round = 0; round < 3; ++round) {
    auto b = buffers_of(2, false);
    for (const auto& s : batch_all(m, b, 1)) EXPECT_TRUE(s) << s.to_string();
    EXPECT_TRUE(b[1].holds(3.0f));
  }
  EXPECT_EQ(world.decisions(true), 3u);
  EXPECT_EQ(world.epoch(), 1u);
}

TEST(BatchFake, InputsAreRestoredBeforeTheRetry) {
  FakeWorld world;
  auto m = world.form(3);
  world.fail_reports(2);  // every all-reduce succeeded, the group fails the attempt
  auto b = buffers_of(3, /*in_place=*/true);
  auto s = batch_all(m, b, 2);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(s[i]) << s[i].to_string();
    EXPECT_TRUE(b[i].holds(6.0f)) << "member " << i << " summed twice";
  }
  EXPECT_EQ(world.epoch(), 2u);
}

TEST(BatchFake, AllAttemptsFailingLeavesTheInputsAsOnEntry) {
  FakeWorld world;
  auto m = world.form(3);
  world.fail_reports(2, 2);
  auto b = buffers_of(3, /*in_place=*/true);
  auto s = batch_all(m, b, 2);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].code(), LH_ERR_PEER_LOST) << s[i].to_string();
    EXPECT_TRUE(b[i].holds(static_cast<float>(i + 1))) << "member " << i;
  }
}

TEST(BatchFake, AMemberKilledMidBatchFailsItEverywhereAndTheRetryRunsOverTheSurvivors) {
  FakeWorld world;
  auto m = world.form(3);
  world.kill_after_sends(3, 2);
  auto b = buffers_of(3, /*in_place=*/true);
  auto s = batch_all(m, b, 2);
  EXPECT_EQ(s[2].code(), LH_ERR_PEER_LOST);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(s[i]) << s[i].to_string();
    EXPECT_TRUE(b[i].holds(3.0f)) << "member " << i;  // members 1 and 2 only, once
  }
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2}));
}

TEST(BatchFake, ARetryAdmitsNoJoinerTheNextUpdateTopologyDoes) {
  FakeWorld world;
  auto m = world.form(3);
  FakeMember& joiner = world.add();
  world.fail_reports(1);
  auto b = buffers_of(3, false);
  for (const auto& s : batch_all(m, b, 2)) EXPECT_TRUE(s) << s.to_string();
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 3}));
  EXPECT_FALSE(world.admitted(joiner.id()));
  EXPECT_TRUE(m[0]->peers_pending());
  m.push_back(&joiner);
  in_parallel(4,
              [&](size_t i) { EXPECT_TRUE(i < 3 ? m[i]->update_topology() : joiner.connect()); });
  auto four = buffers_of(4, false);
  for (const auto& s : batch_all(m, four, 1)) EXPECT_TRUE(s) << s.to_string();
  EXPECT_TRUE(four[3].holds(10.0f));
}

TEST(BatchFake, ZeroAttemptsIsAnInvalidArgument) {
  FakeWorld world;
  auto m = world.form(1);
  Buffers b(0, false);
  EXPECT_EQ(allreduce_batch(*m[0], *m[0], b.items, {}, 0).code(), LH_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace longhaul::peer
