// The master's election, as plain function calls.
#include "state/election.hpp"

#include <gtest/gtest.h>

#include "state/block_hash.hpp"

namespace longhaul::state {
namespace {

using wire::SyncStrategy;

// One tensor "w" of `blocks` blocks whose block hashes are `content` + block index.
Participant peer(uint64_t revision, uint64_t content,
                 SyncStrategy s = SyncStrategy::kEnforcePopular, uint64_t blocks = 4) {
  Participant p;
  p.host = "127.0.0.1";
  p.port = 1000;
  p.report.block_bytes = kBlockBytes;
  p.report.revision = revision;
  p.report.strategy = s;
  wire::TensorReport t;
  t.name = "w";
  t.dtype = 5;  // u8
  t.count = blocks * kBlockBytes;
  for (uint64_t b = 0; b < blocks; ++b) t.block_hashes.push_back(content + b);
  t.compressible.assign((blocks + 7) / 8, 0);
  p.report.tensors.push_back(t);
  return p;
}

TEST(Election, MajorityContentWinsAndOnlyDifferingBlocksAreFetched) {
  std::map<PeerId, Participant> ps = {
      {1, peer(3, 100)}, {2, peer(3, 100)}, {3, peer(3, 100)}, {4, peer(3, 100)}};
  ps[3].report.tensors[0].block_hashes[2] = 999;  // one block drifted
  const auto e = elect(ps, std::nullopt, 7);
  EXPECT_EQ(e.revision, 3u);
  for (const auto& [id, plan] : e.plans) {
    EXPECT_EQ(plan.code, LH_OK);
    EXPECT_EQ(plan.revision, 4u);
    EXPECT_EQ(plan.epoch, 7u);
    EXPECT_EQ(plan.fetches.empty(), id != 3);
  }
  const auto& f = e.plans.at(3).fetches;
  ASSERT_EQ(f.size(), 1u);
  ASSERT_EQ(f[0].blocks.size(), 1u);
  EXPECT_EQ(f[0].blocks[0].index, 2u);
  EXPECT_EQ(f[0].blocks[0].hash, 102u);
  EXPECT_EQ(f[0].sources, (std::vector<uint64_t>{1, 2, 4}));
  EXPECT_EQ(e.plans.at(3).sources.size(), 3u);
}

TEST(Election, TieGoesToTheLowestPeerAndTheJoinerAdopts) {
  std::map<PeerId, Participant> ps = {
      {5, peer(2, 500)}, {6, peer(2, 600)}, {9, peer(0, 0, SyncStrategy::kReceiveOnly)}};
  const auto e = elect(ps, std::nullopt, 1);
  EXPECT_TRUE(e.plans.at(5).fetches.empty());
  ASSERT_EQ(e.plans.at(6).fetches.size(), 1u);
  EXPECT_EQ(e.plans.at(6).fetches[0].blocks[0].hash, 500u);
  ASSERT_EQ(e.plans.at(9).fetches.size(), 1u);
  EXPECT_EQ(e.plans.at(9).fetches[0].blocks.size(), 4u);
  EXPECT_EQ(e.plans.at(9).fetches[0].sources, (std::vector<uint64_t>{5}));
  EXPECT_EQ(e.plans.at(9).revision, 3u) << "the joiner adopts the group's revision + 1";
}

TEST(Election, RevisionRules) {
  // The revision most voters hold (a tie goes to the higher), unless the recorded one is present.
  std::map<PeerId, Participant> ps = {
      {1, peer(4, 1)}, {2, peer(4, 1)}, {3, peer(6, 1)}, {4, peer(2, 1)}};
  auto e = elect(ps, std::nullopt, 1);
  EXPECT_EQ(e.revision, 4u);
  EXPECT_EQ(e.plans.at(3).code, LH_ERR_STATE_MISMATCH);
  EXPECT_NE(e.plans.at(3).reason.find("revision 6 is ahead of the group's revision 4"),
            std::string::npos);
  EXPECT_EQ(e.plans.at(4).code, LH_OK) << "a peer behind catches up";
  EXPECT_EQ(e.plans.at(4).revision, 5u);
  e = elect(ps, 2, 1);
  EXPECT_EQ(e.revision, 2u) << "the recorded revision wins when a voter still holds it";
  EXPECT_EQ(e.plans.at(1).code, LH_ERR_STATE_MISMATCH);
  e = elect({{1, peer(4, 1)}, {2, peer(5, 1)}}, std::nullopt, 1);
  EXPECT_EQ(e.revision, 5u);
  // A send-only peer behind the group must not be overwritten.
  e = elect({{1, peer(4, 1)}, {2, peer(4, 1)}, {3, peer(3, 1, SyncStrategy::kSendOnly)}},
            std::nullopt, 1);
  EXPECT_EQ(e.plans.at(3).code, LH_ERR_STATE_MISMATCH);
  EXPECT_NE(e.plans.at(3).reason.find("send-only"), std::string::npos);
  // A receive-only peer never votes and is never ahead.
  e = elect({{1, peer(4, 1)}, {2, peer(40, 1, SyncStrategy::kReceiveOnly)}}, std::nullopt, 1);
  EXPECT_EQ(e.plans.at(2).code, LH_OK);
  EXPECT_EQ(e.plans.at(2).revision, 5u);
}

TEST(Election, SendOnlyThatDiffersIsRefusedAndNeverASource) {
  std::map<PeerId, Participant> ps = {{1, peer(1, 10)},
                                      {2, peer(1, 10)},
                                      {3, peer(1, 30, SyncStrategy::kSendOnly)},
                                      {4, peer(1, 40)}};
  const auto e = elect(ps, std::nullopt, 1);
  EXPECT_EQ(e.plans.at(3).code, LH_ERR_STATE_MISMATCH);
  EXPECT_NE(e.plans.at(3).reason.find("tensor 'w' differs"), std::string::npos);
  EXPECT_TRUE(e.plans.at(3).fetches.empty());
  ASSERT_EQ(e.plans.at(4).fetches.size(), 1u);
  EXPECT_EQ(e.plans.at(4).fetches[0].sources, (std::vector<uint64_t>{1, 2}));
}

TEST(Election, MismatchedSchemasAreRefusedNamingTheTensor) {
  std::map<PeerId, Participant> ps = {
      {1, peer(0, 1)}, {2, peer(0, 1)}, {3, peer(0, 1)}, {4, peer(0, 1)}, {5, peer(0, 1)}};
  ps[3].report.tensors[0].name = "v";
  ps[4].report.tensors[0].dtype = 0;  // f32: same bytes, different type
  ps[4].report.tensors[0].count /= 4;
  ps[5].report.tensors.push_back(ps[5].report.tensors[0]);
  ps[5].report.tensors[1].name = "x";
  const auto e = elect(ps, std::nullopt, 1);
  EXPECT_EQ(e.plans.at(1).code, LH_OK);
  EXPECT_EQ(e.plans.at(3).code, LH_ERR_STATE_MISMATCH);
  EXPECT_NE(e.plans.at(3).reason.find("tensor 'v' is not part of the group's state"),
            std::string::npos)
      << e.plans.at(3).reason;
  EXPECT_NE(
      e.plans.at(4).reason.find("tensor 'w' is f32[1048576] here but u8[4194304] in the group"),
      std::string::npos)
      << e.plans.at(4).reason;
  EXPECT_NE(e.plans.at(5).reason.find("tensor 'x' is not part"), std::string::npos)
      << e.plans.at(5).reason;
}

TEST(Election, EveryoneReceiveOnlyIsRefused) {
  const auto e = elect({{1, peer(0, 1, SyncStrategy::kReceiveOnly)}}, std::nullopt, 1);
  EXPECT_EQ(e.plans.at(1).code, LH_ERR_STATE_MISMATCH);
}

TEST(Election, ReportsThatContradictTheirSizesAreProtocolErrors) {
  auto p = peer(0, 1);
  EXPECT_TRUE(validate_report(p.report).is_ok());
  p.report.tensors[0].block_hashes.pop_back();
  EXPECT_EQ(validate_report(p.report).code(), LH_ERR_PROTOCOL);
  p = peer(0, 1);
  p.report.block_bytes = 4096;
  EXPECT_EQ(validate_report(p.report).code(), LH_ERR_PROTOCOL);
}

}  // namespace
}  // namespace longhaul::state
