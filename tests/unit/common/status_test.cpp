#include "common/status.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace longhaul {
namespace {

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.code(), LH_OK);
  EXPECT_EQ(s.to_string(), "LH_OK");
}

TEST(Status, CarriesCodeAndMessageWithContext) {
  Status s = peer_lost("connection reset").with_context("link 3");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), LH_ERR_PEER_LOST);
  EXPECT_EQ(s.to_string(), "LH_ERR_PEER_LOST: link 3: connection reset");
}

TEST(Status, ResultHoldsValueOrError) {
  Result<int> good = 7;
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(*good, 7);
  Result<int> bad = timeout_error("too slow");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), LH_ERR_TIMEOUT);
}

TEST(Status, EveryCodeHasAName) {
  for (int c = LH_OK; c <= kLastStatus; ++c)
    EXPECT_NE(std::strcmp(lh_status_string(static_cast<lh_status>(c)), "LH_ERR_UNKNOWN"), 0) << c;
  volatile int unknown = 999;
  EXPECT_STREQ(lh_status_string(static_cast<lh_status>(unknown)), "LH_ERR_UNKNOWN");
}

}  // namespace
}  // namespace longhaul
