// settle() (peer/settle.hpp) on every member of a fake group at once: the decision is the group's,
// a failure is restored and retried on a re-formed ring, and each policy knob does what it says.
#include "peer/settle.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <vector>

#include "fake_group.hpp"

namespace longhaul::peer {
namespace {

using testing::FakeMember;
using testing::FakeWorld;
using testing::in_parallel;

struct MemberRun {
  std::optional<Result<Settled>> settled;
  int restores = 0;
  uint64_t epoch_after = 0;
  bool pending_after = false;
};

using Attempt = std::function<Status(size_t member, uint32_t n)>;

// settle() on every member at once; member i's attempt n is attempt(i, n) (empty: nothing to
// attempt).
std::vector<MemberRun> settle_all(const std::vector<FakeMember*>& members,
                                  const SettlePolicy& policy, const Attempt& attempt) {
  std::vector<MemberRun> runs(members.size());
  in_parallel(members.size(), [&](size_t i) {
    SettleSteps steps;
    if (attempt) steps.attempt = [&, i](uint32_t n) { return attempt(i, n); };
    steps.restore = [&runs, i] { ++runs[i].restores; };
    runs[i].settled.emplace(settle(*members[i], steps, policy));
    runs[i].epoch_after = members[i]->view().epoch;
    runs[i].pending_after = members[i]->peers_pending();
  });
  return runs;
}

// Attempt `n` of member `i` fails with `why`; every other attempt succeeds.
Attempt fail_once(size_t i, uint32_t n, Status why) {
  return [=](size_t member, uint32_t attempt) {
    return member == i && attempt == n ? why : Status::ok();
  };
}

const Settled& settled(const MemberRun& run) {
  EXPECT_TRUE(run.settled && *run.settled) << run.settled->status().to_string();
  return run.settled->value();
}

TEST(Settle, EveryMemberSucceedingAppliesTheFirstAttemptWithTheWholeRing) {
  FakeWorld world;
  auto m = world.form(3);
  auto runs = settle_all(m, {}, [](size_t, uint32_t) { return Status::ok(); });
  for (const auto& run : runs) {
    ASSERT_TRUE(*run.settled);
    EXPECT_TRUE(settled(run).applied);
    EXPECT_EQ(settled(run).attempts, 1u);
    EXPECT_EQ(settled(run).members, (std::vector<PeerId>{1, 2, 3}));
    EXPECT_EQ(run.restores, 0);
  }
  EXPECT_EQ(world.decisions(true), 1u);
  EXPECT_EQ(world.epochs_formed(), 1u);
}

TEST(Settle, AFailedAttemptIsRestoredEverywhereAndRetriedOnAReformedRing) {
  FakeWorld world;
  auto m = world.form(3);
  SettlePolicy policy;
  policy.max_attempts = 3;
  auto runs = settle_all(m, policy, fail_once(1, 1, peer_lost("a link broke")));
  for (const auto& run : runs) {
    ASSERT_TRUE(*run.settled);
    EXPECT_TRUE(settled(run).applied);
    EXPECT_EQ(settled(run).attempts, 2u);
    EXPECT_EQ(run.restores, 1);
    EXPECT_EQ(run.epoch_after, 2u);
  }
  EXPECT_EQ(world.decisions(false), 1u);
  EXPECT_EQ(world.decisions(true), 1u);
}

TEST(Settle, AFailureElsewhereFailsTheDecisionOfAMemberThatSucceeded) {
  FakeWorld world;
  auto m = world.form(3);
  world.fail_reports(2);  // member 2's own attempt succeeds, its report says failed
  auto runs = settle_all(m, {}, [](size_t, uint32_t) { return Status::ok(); });
  for (const auto& run : runs) {
    ASSERT_TRUE(*run.settled);
    EXPECT_FALSE(settled(run).applied);
    EXPECT_TRUE(settled(run).local);
    EXPECT_EQ(settled(run).failure.code(), LH_ERR_PEER_LOST);
    EXPECT_EQ(run.restores, 1);
    EXPECT_TRUE(run.pending_after);  // a failed attempt ends the epoch; the caller re-forms
  }
  EXPECT_EQ(world.epochs_formed(), 1u);
}

TEST(Settle, ReformAfterLastReformsBeforeReturning) {
  FakeWorld world;
  auto m = world.form(3);
  world.fail_reports(2);
  SettlePolicy policy;
  policy.reform_after_last = true;
  auto runs = settle_all(m, policy, [](size_t, uint32_t) { return Status::ok(); });
  for (const auto& run : runs) {
    EXPECT_FALSE(settled(run).applied);
    EXPECT_EQ(run.epoch_after, 2u);
    EXPECT_FALSE(run.pending_after);
  }
}

TEST(Settle, MaxAttemptsBoundsTheRetries) {
  FakeWorld world;
  auto m = world.form(3);
  SettlePolicy policy;
  policy.max_attempts = 3;
  auto runs = settle_all(m, policy, [](size_t i, uint32_t) {
    return i == 2 ? aborted_error("always") : Status::ok();
  });
  for (const auto& run : runs) {
    EXPECT_FALSE(settled(run).applied);
    EXPECT_EQ(settled(run).attempts, 3u);
    EXPECT_EQ(run.restores, 3);
    EXPECT_EQ(run.epoch_after, 3u);  // re-formed between attempts, not after the last
  }
  EXPECT_EQ(settled(runs[2]).local.code(), LH_ERR_ABORTED);
  EXPECT_EQ(settled(runs[0]).failure.code(), LH_ERR_PEER_LOST);
}

TEST(Settle, RetryOnlyAfterLossDropsAnAttemptNobodyWasLostFor) {
  FakeWorld world;
  auto m = world.form(3);
  SettlePolicy policy;
  policy.max_attempts = 3;
  policy.retry_only_after_loss = true;
  policy.reform_after_last = true;
  auto runs = settle_all(m, policy, fail_once(0, 1, aborted_error("aborted")));
  for (const auto& run : runs) {
    EXPECT_FALSE(settled(run).applied);
    EXPECT_EQ(settled(run).attempts, 1u);
    EXPECT_EQ(run.epoch_after, 2u);  // the ring is mended all the same
  }
}

TEST(Settle, RetryOnlyAfterLossRetriesOverTheSurvivors) {
  FakeWorld world;
  auto m = world.form(3);
  world.on_report([&](PeerId id, uint64_t, uint64_t attempt, bool) {
    if (id == 3 && attempt == 1) world.kill(3);
  });
  SettlePolicy policy;
  policy.max_attempts = 3;
  policy.retry_only_after_loss = true;
  auto runs = settle_all(m, policy, [](size_t, uint32_t) { return Status::ok(); });
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(settled(runs[i]).applied);
    EXPECT_EQ(settled(runs[i]).attempts, 2u);
    EXPECT_EQ(settled(runs[i]).members, (std::vector<PeerId>{1, 2}));
  }
  EXPECT_EQ(runs[2].settled->status().code(), LH_ERR_PEER_LOST);
}

TEST(Settle, ARemovedMemberEndsItsSettleWithTheMastersReason) {
  FakeWorld world;
  auto m = world.form(3);
  world.on_report([&](PeerId id, uint64_t, uint64_t, bool) {
    if (id == 2) world.remove(2, Status(LH_ERR_PROTOCOL, "removed by the test"));
  });
  SettlePolicy policy;
  policy.max_attempts = 2;
  auto runs = settle_all(m, policy, [](size_t, uint32_t) { return Status::ok(); });
  EXPECT_EQ(runs[1].settled->status().message(), "removed by the test");
  EXPECT_TRUE(settled(runs[0]).applied);
  EXPECT_EQ(settled(runs[2]).members, (std::vector<PeerId>{1, 3}));
}

TEST(Settle, AFatalLocalFailureEndsThatMembersSettleAndTheOthersGoOnWithoutIt) {
  FakeWorld world;
  auto m = world.form(3);
  SettlePolicy policy;
  policy.max_attempts = 2;
  std::vector<MemberRun> runs(3);
  in_parallel(3, [&](size_t i) {
    SettleSteps steps;
    steps.attempt = [i](uint32_t) { return i == 1 ? invalid_argument("bad") : Status::ok(); };
    runs[i].settled.emplace(settle(*m[i], steps, policy));
    if (!*runs[i].settled) m[i]->close();  // a member that cannot go on leaves
  });
  EXPECT_EQ(runs[1].settled->status().code(), LH_ERR_INVALID_ARGUMENT);
  for (size_t i : {0, 2}) {
    EXPECT_TRUE(settled(runs[i]).applied);
    EXPECT_EQ(settled(runs[i]).members, (std::vector<PeerId>{1, 3}));
  }
}

TEST(Settle, TheFatalPolicyDecidesWhatARetryMends) {
  FakeWorld world;
  auto m = world.form(2);
  SettlePolicy policy;
  policy.max_attempts = 2;
  policy.fatal = [](const Status&) { return false; };
  auto runs = settle_all(m, policy, fail_once(1, 1, invalid_argument("mendable here")));
  for (const auto& run : runs) {
    EXPECT_TRUE(settled(run).applied);
    EXPECT_EQ(settled(run).attempts, 2u);
  }
}

TEST(Settle, AnAcceptThatRefusesMakesEveryMemberRetry) {
  FakeWorld world;
  auto m = world.form(2);
  SettlePolicy policy;
  policy.max_attempts = 2;
  policy.accept = [](const Decision&) { return false; };
  auto runs = settle_all(m, policy, [](size_t, uint32_t) { return Status::ok(); });
  for (const auto& run : runs) {
    EXPECT_FALSE(settled(run).applied);
    EXPECT_EQ(settled(run).attempts, 2u);
    EXPECT_EQ(run.restores, 2);
  }
  EXPECT_EQ(world.decisions(true), 2u);  // the master said OK both times
}

TEST(Settle, AnAcceptThatTakesAFailedDecisionApplies) {
  FakeWorld world;
  auto m = world.form(2);
  world.fail_reports(1);
  SettlePolicy policy;
  policy.accept = [](const Decision& d) { return !d.all_succeeded; };
  auto runs = settle_all(m, policy, [](size_t, uint32_t) { return Status::ok(); });
  for (const auto& run : runs) {
    EXPECT_TRUE(settled(run).applied);
    EXPECT_TRUE(settled(run).members.empty());
    EXPECT_EQ(run.restores, 0);
  }
}

TEST(Settle, NothingToAttemptSettlesAtOnceWithoutADecision) {
  FakeWorld world;
  auto m = world.form(2);
  auto runs = settle_all(m, {}, {});
  for (const auto& run : runs) {
    EXPECT_TRUE(settled(run).applied);
    EXPECT_EQ(settled(run).attempts, 0u);
  }
  EXPECT_EQ(world.decisions(true) + world.decisions(false), 0u);
}

TEST(Settle, JoinersWaitForTheCallersAdmissionPoint) {
  FakeWorld world;
  auto m = world.form(3);
  FakeMember& joiner = world.add();
  SettlePolicy policy;
  policy.max_attempts = 2;
  std::vector<int> pending_in_retry(3, -1);
  auto runs = settle_all(m, policy, [&](size_t i, uint32_t n) {
    if (n == 2) pending_in_retry[i] = m[i]->peers_pending();
    return i == 0 && n == 1 ? peer_lost("lost") : Status::ok();
  });
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(settled(runs[i]).applied);
    EXPECT_EQ(settled(runs[i]).members, (std::vector<PeerId>{1, 2, 3}));
    EXPECT_EQ(pending_in_retry[i], 0);   // the retry's re-formation holds the joiner back
    EXPECT_TRUE(runs[i].pending_after);  // ... until the retry is decided
  }
  EXPECT_FALSE(world.admitted(joiner.id()));
  in_parallel(4,
              [&](size_t i) { EXPECT_TRUE(i < 3 ? m[i]->update_topology() : joiner.connect()); });
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 3, 4}));
}

// Two nodes of two rails: node k's rail r is member 2k + r + 1, in group r.
TEST(Settle, TheRailsOfANodeReformTogetherWhenOneRailsAttemptFailed) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  std::vector<FakeMember*> m{nodes[0][0], nodes[0][1], nodes[1][0], nodes[1][1]};
  ASSERT_EQ(world.ring(1), (std::vector<PeerId>{2, 4}));
  SettlePolicy policy;
  policy.max_attempts = 2;
  policy.node_point = 1;
  auto runs = settle_all(m, policy, fail_once(3, 1, peer_lost("rail 1 lost a link")));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(settled(runs[i]).applied);
    EXPECT_EQ(settled(runs[i]).attempts, i % 2 == 0 ? 1u : 2u);  // rail 0 succeeded at once
    EXPECT_EQ(runs[i].epoch_after, 2u);  // every rail re-formed, in one epoch
  }
}

TEST(Settle, NodeAgreementOrsTheRailsFlagsAndAPeerOfNoNodeDecidesAlone) {
  FakeWorld world;
  auto nodes = world.form_nodes(1, 3);
  FakeMember& loner = world.add(7);
  std::vector<uint32_t> got(3);
  in_parallel(3, [&](size_t r) {
    auto flags = nodes[0][r]->agree_in_node(2, 1u << r);
    ASSERT_TRUE(flags);
    got[r] = *flags;
  });
  EXPECT_EQ(got, (std::vector<uint32_t>{7, 7, 7}));
  auto alone = loner.agree_in_node(2, 5);
  ASSERT_TRUE(alone);
  EXPECT_EQ(*alone, 5u);
}

TEST(Settle, RailsReachingOnePointAsDifferentKindsEvictTheirNode) {
  FakeWorld world;
  auto nodes = world.form_nodes(2, 2);
  std::vector<Status> got(2);
  in_parallel(2, [&](size_t r) {
    got[r] = nodes[0][r]->agree_in_node(static_cast<uint32_t>(r + 1), 0).status();
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r].code(), LH_ERR_NODE_EVICTED);
    EXPECT_EQ(nodes[0][r]->failure().code(), LH_ERR_NODE_EVICTED);
  }
  EXPECT_TRUE(nodes[1][0]->failure());
  EXPECT_TRUE(nodes[1][0]->peers_pending());
}

TEST(Settle, OnlyALostPeerOrAnAbortIsRetryable) {
  EXPECT_TRUE(retryable(peer_lost("x")));
  EXPECT_TRUE(retryable(aborted_error("x")));
  EXPECT_FALSE(retryable(timeout_error("x")));
  EXPECT_FALSE(retryable(closed_error("x")));
  EXPECT_FALSE(retryable(node_evicted("x")));
  EXPECT_FALSE(retryable(Status::ok()));
}

}  // namespace
}  // namespace longhaul::peer
