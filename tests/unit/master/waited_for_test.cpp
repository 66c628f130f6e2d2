// Members the group waits for (batch_arbiter.hpp): an engine round that runs past a member's own
// deadline is reported late and fails; a member whose report comes well after that, and not late
// itself, had not started the round. The group waiting for the same member evict_after_missed
// times in a row evicts it; any other report of it starts the count again.
#include <gtest/gtest.h>

#include <chrono>

#include "master/batch_arbiter.hpp"
#include "master_fixture.hpp"

namespace longhaul::master {
namespace {

using namespace std::chrono_literals;
using Clock = BatchArbiter::Clock;

class WaitedForTest : public MasterFixture {
 protected:
  static constexpr uint32_t kEvictAfter = 3;

  WaitedForTest() {
    out.on_group_epoch_failed = [this](uint32_t group) { batch.on_group_epoch_failed(group); };
  }

  BatchArbiter batch{out, m, kEvictAfter};
  Clock::time_point now = Clock::now();

  // Reports attempt `attempt_` of the committed epoch.
  Status report(PeerId id, bool ok, bool late, Clock::time_point at) {
    return batch.on_report(id, wire::BatchReportMsg{m.epoch(), attempt_, ok, late}, at);
  }

  // One attempt that ran past the deadline of `waiting[0]`: it reports late, the other waiting
  // members fail `cancel_lag` later (the cancel reaching them), and `last` reports `lateness`
  // after the first; then everyone still there re-forms into the next epoch.
  void round_waiting_for(const std::vector<PeerId>& waiting, PeerId last,
                         std::chrono::milliseconds lateness,
                         std::chrono::milliseconds cancel_lag = 20ms) {
    now += 10s;
    ASSERT_TRUE(report(waiting[0], false, true, now).is_ok());
    for (size_t i = 1; i < waiting.size(); ++i)
      ASSERT_TRUE(report(waiting[i], false, false, now + cancel_lag).is_ok());
    ASSERT_TRUE(report(last, false, false, now + lateness).is_ok());
    reform();
  }
  // An attempt every active member reports OK (the epoch goes on: the next attempt is numbered on).
  void round_on_time() {
    now += 10s;
    for (PeerId id : active()) ASSERT_TRUE(report(id, true, false, now).is_ok());
    ++attempt_;
  }
  // Every active member comes to update_topology after the failed attempt; the new epoch commits.
  void reform() {
    for (PeerId id : active())
      ASSERT_TRUE(m.on_update_topology(id, m.epoch(), /*admit_joiners=*/false).is_ok());
    all_ready();
    attempt_ = 1;
  }
  std::vector<PeerId> active() const {
    std::vector<PeerId> ids;
    for (const auto& [id, member] : m.members())
      if (member.state == Membership::State::kActive) ids.push_back(id);
    return ids;
  }
  bool member(PeerId id) const { return m.members().contains(id); }
  // Why `id` was disconnected (empty: it was not).
  std::string removal(PeerId id) const {
    for (const auto& [who, why] : out.disconnected)
      if (who == id) return why.to_string();
    return {};
  }

  uint64_t attempt_ = 1;
};

TEST_F(WaitedForTest, AMemberTheGroupWaitsForThreeTimesInARowIsEvictedWithTheReason) {
  const auto ids = form(4);
  const std::vector<PeerId> waiting{ids[0], ids[1], ids[2]};
  round_waiting_for(waiting, ids[3], 5s);
  round_waiting_for(waiting, ids[3], 5s);
  EXPECT_TRUE(member(ids[3])) << "two rounds in a row are forgiven";
  now += 10s;
  ASSERT_TRUE(report(ids[0], false, true, now).is_ok());
  ASSERT_TRUE(report(ids[1], false, false, now).is_ok());
  ASSERT_TRUE(report(ids[2], false, false, now).is_ok());
  ASSERT_TRUE(report(ids[3], false, false, now + 5s).is_ok());
  EXPECT_FALSE(member(ids[3]));
  const std::string why = removal(ids[3]);
  EXPECT_NE(why.find("waited for it in 3 rounds in a row"), std::string::npos) << why;
  EXPECT_NE(why.find("by 5000 ms"), std::string::npos) << why;
  // The others' re-formation goes on without it.
  reform();
  EXPECT_EQ(m.rings().at(0), waiting);
}

TEST_F(WaitedForTest, AMemberThatComesBackInTimeStartsTheCountAgain) {
  const auto ids = form(3);
  const std::vector<PeerId> waiting{ids[0], ids[1]};
  round_waiting_for(waiting, ids[2], 3s);
  round_waiting_for(waiting, ids[2], 3s);
  round_on_time();
  round_waiting_for(waiting, ids[2], 3s);
  round_waiting_for(waiting, ids[2], 3s);
  EXPECT_TRUE(member(ids[2])) << "an on-time round in between ended the run of waits";
  round_waiting_for(waiting, ids[2], 3s);
  EXPECT_FALSE(member(ids[2]));
}

// The others' reports trail the first late one by the cancel's trip, and a member just past the
// deadline reports within the grace too: neither was waited for.
TEST_F(WaitedForTest, ReportsWithinTheGraceOfTheDeadlineAreNotWaits) {
  const auto ids = form(3);
  for (int i = 0; i < 5; ++i)
    round_waiting_for({ids[0], ids[1]}, ids[2], BatchArbiter::kWaitedForGrace, 900ms);
  EXPECT_TRUE(member(ids[1]));
  EXPECT_TRUE(member(ids[2]));
}

// A member whose own deadline passed waited for someone else, however late it reports; a failure
// that was no deadline's (a lost link, an abort) names nobody, so it ends a run of waits.
TEST_F(WaitedForTest, OnlyAFailureAtADeadlineCountsAndOnlyForMembersNotLateThemselves) {
  const auto ids = form(3);
  for (int i = 0; i < 4; ++i) {
    now += 10s;
    ASSERT_TRUE(report(ids[0], false, true, now).is_ok());
    ASSERT_TRUE(report(ids[1], false, true, now + 3s).is_ok());
    ASSERT_TRUE(report(ids[2], false, false, now + 4s).is_ok());
    reform();
    now += 10s;
    ASSERT_TRUE(report(ids[0], false, false, now).is_ok());  // a link broke
    ASSERT_TRUE(report(ids[1], false, false, now + 3s).is_ok());
    ASSERT_TRUE(report(ids[2], false, false, now + 4s).is_ok());
    reform();
  }
  for (PeerId id : ids) EXPECT_TRUE(member(id)) << "peer " << id;
}

TEST_F(WaitedForTest, ZeroNeverEvicts) {
  BatchArbiter never{out, m, 0};
  const auto ids = form(2);
  for (int i = 0; i < 6; ++i) {
    now += 10s;
    ASSERT_TRUE(never.on_report(ids[0], {m.epoch(), 1, false, true}, now).is_ok());
    ASSERT_TRUE(never.on_report(ids[1], {m.epoch(), 1, false, false}, now + 5s).is_ok());
    reform();
  }
  EXPECT_TRUE(member(ids[1]));
}

}  // namespace
}  // namespace longhaul::master
