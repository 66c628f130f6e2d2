#include "master/ring_order.hpp"

#include <gtest/gtest.h>

namespace longhaul::master {
namespace {

bool valid_ring(const std::vector<PeerId>& ring, const std::set<PeerPair>& banned) {
  for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i)
    if (banned.contains(make_peer_pair(ring[i], ring[(i + 1) % ring.size()]))) return false;
  return true;
}

TEST(RingOrder, DefaultsToAscendingIds) {
  auto ring = solve_ring({5, 1, 3}, {});
  ASSERT_TRUE(ring);
  EXPECT_EQ(*ring, (std::vector<PeerId>{1, 3, 5}));
  EXPECT_EQ(*solve_ring({}, {}), std::vector<PeerId>{});
  EXPECT_EQ(*solve_ring({9}, {}), std::vector<PeerId>{9});
}

TEST(RingOrder, AvoidsBannedPairsDeterministically) {
  const std::set<PeerPair> banned = {make_peer_pair(1, 2), make_peer_pair(3, 4)};
  auto ring = solve_ring({1, 2, 3, 4, 5}, banned);
  ASSERT_TRUE(ring);
  EXPECT_TRUE(valid_ring(*ring, banned));
  EXPECT_EQ(*ring, *solve_ring({5, 4, 3, 2, 1}, banned));
}

TEST(RingOrder, ReportsWhenNoRingExists) {
  EXPECT_FALSE(solve_ring({1, 2}, {make_peer_pair(1, 2)}));
  // In a ring of three every pair is adjacent.
  EXPECT_FALSE(solve_ring({1, 2, 3}, {make_peer_pair(2, 3)}));
  // Peer 1 can reach only one other peer: it cannot have two neighbours.
  EXPECT_FALSE(solve_ring({1, 2, 3, 4}, {make_peer_pair(1, 2), make_peer_pair(1, 3)}));
}

TEST(RingOrder, SearchIsBounded) {
  std::vector<PeerId> ids;
  std::set<PeerPair> banned;
  for (PeerId i = 1; i <= 40; ++i) ids.push_back(i);
  for (PeerId i = 2; i <= 40; ++i) banned.insert(make_peer_pair(1, i));  // 1 is isolated
  banned.erase(make_peer_pair(1, 40));
  EXPECT_FALSE(solve_ring(ids, banned, 10'000));
}

}  // namespace
}  // namespace longhaul::master
