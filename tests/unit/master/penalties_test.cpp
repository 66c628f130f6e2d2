// The master's memory of misbehaving members: back-off per identity, doubling, capped, bounded.
#include "master/penalties.hpp"

#include <gtest/gtest.h>

namespace longhaul::master {
namespace {

using namespace std::chrono_literals;
using Clock = Penalties::Clock;

TEST(Penalties, EachOffenceDoublesTheBackOffUpToTheCap) {
  Penalties p(1000ms, 5000ms);
  const auto t = Clock::now();
  const std::string who = Penalties::identity("10.0.0.1", 4000, "");
  EXPECT_EQ(p.refused_for(who, t).count(), 0);
  EXPECT_EQ(p.record(who, t), 1000ms);
  EXPECT_EQ(p.refused_for(who, t + 400ms), 600ms);
  EXPECT_EQ(p.refused_for(who, t + 1000ms).count(), 0);
  EXPECT_EQ(p.record(who, t + 2s), 2000ms);
  EXPECT_EQ(p.record(who, t + 5s), 4000ms);
  EXPECT_EQ(p.record(who, t + 10s), 5000ms);
  EXPECT_EQ(p.offences(who), 4u);
  // Another port or node is another identity.
  EXPECT_EQ(p.refused_for(Penalties::identity("10.0.0.1", 4001, ""), t + 10s).count(), 0);
  EXPECT_EQ(p.refused_for(Penalties::identity("10.0.0.1", 4000, "box"), t + 10s).count(), 0);
}

// Issue 50, item 3: an address's first failed admission is free (one honest mishap behind a NAT
// keeps nobody out), the next ones ban it with the same doubling back-off.
TEST(Penalties, AnAddressIsBannedFromItsSecondOffenceOn) {
  Penalties p(1000ms, 5000ms);
  const auto t = Clock::now();
  const std::string address = Penalties::address_key("10.0.0.1");
  EXPECT_EQ(p.record(address, t, Penalties::kFreeAddressOffences).count(), 0);
  EXPECT_EQ(p.refused_for(address, t).count(), 0);
  EXPECT_EQ(p.record(address, t + 1s, Penalties::kFreeAddressOffences), 1000ms);
  EXPECT_EQ(p.refused_for(address, t + 1500ms), 500ms);
  EXPECT_EQ(p.record(address, t + 3s, Penalties::kFreeAddressOffences), 2000ms);
  EXPECT_EQ(p.offences(address), 3u);
  // A free offence is still remembered for the cap, so the next one counts.
  Penalties q(1000ms, 5000ms);
  q.record(address, t, Penalties::kFreeAddressOffences);
  EXPECT_EQ(q.record(address, t + 4s, Penalties::kFreeAddressOffences), 1000ms);
}

TEST(Penalties, ARecordIsForgottenACapAfterItsBackOffEnded) {
  Penalties p(1000ms, 5000ms);
  const auto t = Clock::now();
  p.record("a", t);
  p.record("b", t + 7s);  // "a" ended at 1 s; 6 s later it is forgotten
  EXPECT_EQ(p.offences("a"), 0u);
  EXPECT_EQ(p.record("a", t + 7s), 1000ms) << "a first offence again";
}

TEST(Penalties, TheTableIsBounded) {
  Penalties p(1000ms, 600000ms);
  const auto t = Clock::now();
  for (size_t i = 0; i < Penalties::kMaxRemembered + 100; ++i)
    p.record("id" + std::to_string(i), t + std::chrono::milliseconds(i));
  EXPECT_EQ(p.offences("id0"), 0u) << "the oldest went";
  EXPECT_EQ(p.offences("id" + std::to_string(Penalties::kMaxRemembered + 99)), 1u);
}

TEST(Penalties, ZeroBaseRemembersNothing) {
  Penalties p(0ms, 600000ms);
  EXPECT_EQ(p.record("a", Clock::now()).count(), 0);
  EXPECT_EQ(p.refused_for("a", Clock::now()).count(), 0);
}

}  // namespace
}  // namespace longhaul::master
