// What a peer posts on its StatsBoard reaches the master in PEER_STATS: the sync engine's figures,
// the overlap's included, survive the board and the wire unchanged.
#include "peer/peer_stats.hpp"

#include <gtest/gtest.h>

#include <variant>

namespace longhaul::peer {
namespace {

// The PEER_STATS a peer with `board` sends, as the master decodes it.
wire::PeerStatsMsg sent_and_received(const std::shared_ptr<StatsBoard>& board) {
  StatsSources sources;
  sources.board = board;
  RingLinks links;
  links.epoch = 7;
  auto back = wire::decode_control(wire::encode_control(make_peer_stats(sources, links)));
  EXPECT_TRUE(back.is_ok()) << back.status().to_string();
  if (!back) return {};
  return std::get<wire::PeerStatsMsg>(*back);
}

TEST(PeerStats, TheEnginesOverlapReachesTheMaster) {
  auto board = std::make_shared<StatsBoard>();
  EngineFigures f;
  f.inner_steps = 120;
  f.outer_rounds = 11;
  f.blocked_ns = 3'000'000;
  f.delay = 3;
  f.delay_needed = 4;
  f.delay_changes = 2;
  f.sync_time_ns = 410'000'000;
  f.step_time_ns = 98'000'000;
  board->set_engine(f);
  const wire::PeerStatsMsg m = sent_and_received(board);
  EXPECT_EQ(m.epoch, 7u);
  EXPECT_TRUE(m.has_engine);
  EXPECT_FALSE(m.has_state);
  EXPECT_EQ(m.inner_steps, 120u);
  EXPECT_EQ(m.outer_rounds, 11u);
  EXPECT_EQ(m.blocked_ns, 3'000'000u);
  EXPECT_EQ(m.delay, 3u);
  EXPECT_EQ(m.delay_needed, 4u);
  EXPECT_EQ(m.delay_changes, 2u);
  EXPECT_EQ(m.sync_time_ns, 410'000'000u);
  EXPECT_EQ(m.step_time_ns, 98'000'000u);
}

TEST(PeerStats, APeerWithoutAnEngineReportsNoEngineFigures) {
  const wire::PeerStatsMsg m = sent_and_received(std::make_shared<StatsBoard>());
  EXPECT_FALSE(m.has_engine);
  EXPECT_EQ(m.delay, 0u);
  EXPECT_EQ(m.delay_needed, 0u);
  EXPECT_EQ(m.sync_time_ns, 0u);
}

}  // namespace
}  // namespace longhaul::peer
