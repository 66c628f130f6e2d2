// The master as the commit point of batch all-reduce attempts, driven directly with Membership and
// a recording outbox (as the server wires them).
#include "master/batch_arbiter.hpp"

#include <gtest/gtest.h>

#include "master_fixture.hpp"

namespace longhaul::master {
namespace {

class BatchArbiterTest : public MasterFixture {
 protected:
  BatchArbiterTest() {
    out.on_group_epoch_failed = [this](uint32_t group) { batch.on_group_epoch_failed(group); };
  }

  BatchArbiter batch{out, m};

  Status report(PeerId id, uint64_t attempt, bool ok) {
    return batch.on_report(id, wire::BatchReportMsg{m.epoch(), attempt, ok});
  }
  // The decisions sent since the last call, by recipient.
  std::map<PeerId, bool> decisions() {
    std::map<PeerId, bool> d;
    for (auto& [to, msg] : out.take<wire::BatchDecisionMsg>()) {
      EXPECT_EQ(msg.epoch, m.epoch());
      EXPECT_TRUE(d.emplace(to, msg.ok).second) << "peer " << to << " told twice";
    }
    return d;
  }
};

TEST_F(BatchArbiterTest, OkOnlyOnceEveryMemberReportedOk) {
  const auto ids = form(3);
  ASSERT_TRUE(report(ids[0], 1, true).is_ok());
  ASSERT_TRUE(report(ids[1], 1, true).is_ok());
  EXPECT_TRUE(decisions().empty()) << "peer " << ids[2] << " has not reported";
  ASSERT_TRUE(report(ids[2], 1, true).is_ok());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[0], true}, {ids[1], true}, {ids[2], true}}));
  // The next attempt of the same epoch is decided on its own.
  ASSERT_TRUE(report(ids[1], 2, true).is_ok());
  EXPECT_TRUE(decisions().empty());
}

// A member that never reports held its group's attempt forever. Now the attempt fails at the
// round timeout, counted from the first expire() that saw it, and the silent member is named.
TEST_F(BatchArbiterTest, AnAttemptWaitingPastItsDeadlineFailsAndNamesTheSilentMembers) {
  using namespace std::chrono_literals;
  const auto ids = form(3);
  ASSERT_TRUE(report(ids[0], 1, true).is_ok());
  ASSERT_TRUE(report(ids[1], 1, true).is_ok());
  const auto t0 = BatchArbiter::Clock::now();
  EXPECT_TRUE(batch.expire(t0, 1000ms).empty());
  EXPECT_TRUE(batch.expire(t0 + 999ms, 1000ms).empty());
  EXPECT_TRUE(decisions().empty());
  const auto silent = batch.expire(t0 + 1000ms, 1000ms);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].first, ids[2]);
  EXPECT_EQ(silent[0].second.code(), LH_ERR_TIMEOUT);
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[0], false}, {ids[1], false}}));
  EXPECT_TRUE(batch.expire(t0 + 5000ms, 1000ms).empty()) << "decided once";
}

TEST_F(BatchArbiterTest, OneFailureDecidesFailedAtOnceAndLaterReportsGetTheSameDecision) {
  const auto ids = form(3);
  ASSERT_TRUE(report(ids[0], 1, true).is_ok());
  ASSERT_TRUE(report(ids[1], 1, false).is_ok());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[0], false}, {ids[1], false}}));
  // Its all-reduces succeeded (the abort reached it too late), but the group's attempt failed.
  ASSERT_TRUE(report(ids[2], 1, true).is_ok());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[2], false}}));
}

TEST_F(BatchArbiterTest, LostMemberFailsTheUndecidedAttemptButNotADecidedOne) {
  const auto ids = form(3);
  for (PeerId id : ids) ASSERT_TRUE(report(id, 1, true).is_ok());
  EXPECT_EQ(decisions().size(), 3u);
  ASSERT_TRUE(report(ids[0], 2, true).is_ok());
  m.drop_peer(ids[2], "connection lost");
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[0], false}}));
  // A survivor that reports afterwards, OK or not, gets FAILED: the lost member ran no attempt 2.
  ASSERT_TRUE(report(ids[1], 2, true).is_ok());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[1], false}}));
  ASSERT_TRUE(report(ids[1], 3, true).is_ok());
  ASSERT_TRUE(report(ids[0], 3, true).is_ok());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[0], false}, {ids[1], false}}))
      << "every later attempt of the broken epoch fails too";
}

TEST_F(BatchArbiterTest, GracefulLeaveFailsTheUndecidedAttemptWithoutAnAbort) {
  const auto ids = form(3);
  ASSERT_TRUE(report(ids[0], 1, true).is_ok());
  m.drop_peer(ids[1], "left gracefully", /*graceful=*/true);
  EXPECT_TRUE(out.take<wire::AbortMsg>().empty());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[0], false}}));
}

TEST_F(BatchArbiterTest, MemberWaitingForAReconfigurationFailsTheOthersAttempt) {
  const auto ids = form(2);
  join();  // a newcomer: the first member to wait aborts the group
  out.sent.clear();
  ASSERT_TRUE(report(ids[1], 1, true).is_ok());
  ASSERT_TRUE(m.on_update_topology(ids[0], m.epoch()).is_ok());
  EXPECT_EQ(out.take<wire::AbortMsg>().size(), 2u);
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[1], false}}))
      << "the waiting member will not run attempt 1: the reporter must not wait for it";
}

TEST_F(BatchArbiterTest, OtherGroupsAreIndependent) {
  const auto g0 = form(2, 0);
  const auto g1 = form(2, 1);
  ASSERT_TRUE(report(g1[0], 1, false).is_ok());
  ASSERT_TRUE(report(g0[0], 1, true).is_ok());
  ASSERT_TRUE(report(g0[1], 1, true).is_ok());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{g1[0], false}, {g0[0], true}, {g0[1], true}}));
}

TEST_F(BatchArbiterTest, RetryRoundAdmitsNoJoinerAndHoldsTheFlagUntilTheRetryIsDecided) {
  const auto ids = form(2);
  ASSERT_TRUE(report(ids[0], 1, false).is_ok());
  ASSERT_TRUE(report(ids[1], 1, true).is_ok());
  EXPECT_EQ(decisions().size(), 2u);
  const PeerId newcomer = join();
  out.sent.clear();
  // One member retries the batch; the other came to update_topology for the newcomer.
  ASSERT_TRUE(m.on_update_topology(ids[0], m.epoch(), /*admit_joiners=*/false).is_ok());
  ASSERT_TRUE(m.on_update_topology(ids[1], m.epoch(), /*admit_joiners=*/true).is_ok());
  auto proposals = out.take<wire::TopologyMsg>();
  ASSERT_EQ(proposals.size(), 2u) << "the newcomer is not proposed";
  for (auto& [to, p] : proposals) {
    EXPECT_NE(to, newcomer);
    ASSERT_TRUE(m.on_links_ready(to, p.epoch, {}).is_ok());
  }
  for (auto& [to, commit] : out.take<wire::EpochCommitMsg>())
    EXPECT_FALSE(commit.peers_pending) << "the members' next operation must be the retry";
  EXPECT_EQ(m.members().at(newcomer).state, Membership::State::kPending);
  EXPECT_TRUE(m.reconfiguration_needed());
  // Attempts count from 1 again in the new epoch.
  ASSERT_TRUE(report(ids[1], 1, true).is_ok());
  EXPECT_TRUE(out.take<wire::PendingChangedMsg>().empty());
  ASSERT_TRUE(report(ids[0], 1, true).is_ok());
  EXPECT_EQ(decisions(), (std::map<PeerId, bool>{{ids[0], true}, {ids[1], true}}));
  auto flags = out.take<wire::PendingChangedMsg>();
  ASSERT_EQ(flags.size(), 2u) << "the retry is decided: now admit the newcomer";
  EXPECT_TRUE(flags[0].second.pending);
  // The next ordinary update_topology admits it.
  for (PeerId id : ids) ASSERT_TRUE(m.on_update_topology(id, m.epoch()).is_ok());
  all_ready();
  EXPECT_EQ(m.members().at(newcomer).state, Membership::State::kActive);
}

TEST_F(BatchArbiterTest, RetryRoundStillRemovesTheLostMember) {
  const auto ids = form(3);
  const PeerId newcomer = join();
  m.drop_peer(ids[2], "connection lost");
  out.sent.clear();
  for (size_t i = 0; i < 2; ++i)
    ASSERT_TRUE(m.on_update_topology(ids[i], m.epoch(), /*admit_joiners=*/false).is_ok());
  all_ready();
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{ids[0], ids[1]}));
  EXPECT_EQ(m.members().at(newcomer).state, Membership::State::kPending);
}

TEST_F(BatchArbiterTest, ReportForAnEpochTheGroupHasLeftIsFailed) {
  const auto ids = form(2);
  const uint64_t old_epoch = m.epoch();
  ASSERT_TRUE(report(ids[0], 1, false).is_ok());
  join();
  for (PeerId id : ids) ASSERT_TRUE(m.on_update_topology(id, m.epoch()).is_ok());
  all_ready();
  ASSERT_GT(m.epoch(), old_epoch);
  out.sent.clear();
  ASSERT_TRUE(batch.on_report(ids[1], wire::BatchReportMsg{old_epoch, 1, true}).is_ok());
  auto d = out.take<wire::BatchDecisionMsg>();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].second.epoch, old_epoch);
  EXPECT_FALSE(d[0].second.ok);
}

// A failed attempt ends its epoch, even when nothing the master knows asks for a re-formation:
// the members re-form with the same ring. (No member lost, nobody pending: a peer's deadline, or
// an abort that reached the group before the loss behind it reached the master.)
TEST_F(BatchArbiterTest, AFailedAttemptEndsTheEpochWithNothingElseToReForm) {
  const auto ids = form(2);
  const uint64_t old_epoch = m.epoch();
  ASSERT_TRUE(report(ids[0], 1, false).is_ok());
  out.sent.clear();
  for (PeerId id : ids) ASSERT_TRUE(m.on_update_topology(id, m.epoch(), false).is_ok());
  EXPECT_TRUE(out.take<wire::TopologyUnchangedMsg>().empty());
  all_ready();
  EXPECT_EQ(m.epoch(), old_epoch + 1);
  EXPECT_EQ(m.rings().at(0), ids);
}

// The race CI found (a θ_g divergence under churn): a peer is killed; its neighbour's abort fails
// everyone's round before the master learns of the loss. The first member to ask must not be told
// "unchanged" while the next, asking once the master knows, waits for a new epoch: the first would
// go on to its next round and enter the new epoch a round ahead of the other, and every round
// after would be dropped (the members sent different rounds), training nothing.
TEST_F(BatchArbiterTest, EveryMemberOfAFailedAttemptEntersTheNextEpochFromIt) {
  const auto ids = form(3);
  ASSERT_TRUE(report(ids[0], 1, false).is_ok());
  ASSERT_TRUE(report(ids[1], 1, false).is_ok());
  out.sent.clear();
  ASSERT_TRUE(m.on_update_topology(ids[0], m.epoch(), false).is_ok());
  m.drop_peer(ids[2], "connection lost");  // the loss reaches the master only now
  ASSERT_TRUE(m.on_update_topology(ids[1], m.epoch(), false).is_ok());
  EXPECT_TRUE(out.take<wire::TopologyUnchangedMsg>().empty());
  all_ready();
  EXPECT_EQ(m.rings().at(0), (std::vector<PeerId>{ids[0], ids[1]}));
}

TEST_F(BatchArbiterTest, ProtocolViolationsAreRefused) {
  const auto ids = form(2);
  const PeerId pending = join();
  EXPECT_EQ(batch.on_report(pending, wire::BatchReportMsg{m.epoch(), 1, true}).code(),
            LH_ERR_PROTOCOL)
      << "not admitted";
  EXPECT_EQ(batch.on_report(ids[0], wire::BatchReportMsg{m.epoch() + 1, 1, true}).code(),
            LH_ERR_PROTOCOL)
      << "an epoch not committed";
  ASSERT_TRUE(report(ids[0], 1, true).is_ok());
  EXPECT_EQ(report(ids[0], 1, true).code(), LH_ERR_PROTOCOL) << "twice";
  EXPECT_TRUE(decisions().empty());
}

}  // namespace
}  // namespace longhaul::master
