// The emulator's pure parts: route/setting/schedule syntax, the rate limiter's long-run rate and
// round-robin sharing, and the delay model's bounds, order and reproducibility.
#include <gtest/gtest.h>

#include <chrono>

#include "wanem/delay_model.hpp"
#include "wanem/rate_limiter.hpp"
#include "wanem/route_spec.hpp"
#include "wanem/schedule.hpp"

namespace longhaul::wanem {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(RouteSpec, ParsesNameListenTargetAndOptionsOverDefaults) {
  LinkShape defaults;
  defaults.latency_ms = 7;
  defaults.rate_mbit = 3;
  RouteSpec spec;
  ASSERT_TRUE(
      parse_route_spec("a-1=127.0.0.1:0>[::1]:9000,latency_ms=40,jitter_ms=2.5", defaults, &spec));
  EXPECT_EQ(spec.name, "a-1");
  EXPECT_EQ(spec.listen.to_string(), "127.0.0.1:0");
  ASSERT_TRUE(spec.target.has_value());
  EXPECT_EQ(spec.target->to_string(), "[::1]:9000");
  EXPECT_EQ(spec.shape.latency_ms, 40);
  EXPECT_EQ(spec.shape.jitter_ms, 2.5);
  EXPECT_EQ(spec.shape.rate_mbit, 3);  // from the defaults
  ASSERT_TRUE(parse_route_spec("b=localhost:5>-", defaults, &spec));
  EXPECT_FALSE(spec.target.has_value());
}

TEST(RouteSpec, RefusesMalformedRoutesWithTheReason) {
  RouteSpec spec;
  const auto why = [&](const char* text) { return parse_route_spec(text, {}, &spec).message(); };
  EXPECT_NE(why("a127.0.0.1:0>-").find("no '=' after the name"), std::string::npos);
  EXPECT_NE(why("a=127.0.0.1:0").find("no '>'"), std::string::npos);
  EXPECT_NE(why("a b=127.0.0.1:0>-").find("bad route name"), std::string::npos);
  EXPECT_NE(why("a=127.0.0.1>-").find("not host:port"), std::string::npos);
  EXPECT_NE(why("a=127.0.0.1:0>127.0.0.1:70000").find("0..65535"), std::string::npos);
  EXPECT_NE(why("a=127.0.0.1:0>-,latency_ms").find("not key=value"), std::string::npos);
  EXPECT_NE(why("a=127.0.0.1:0>-,speed=3").find("unknown setting 'speed'"), std::string::npos);
  EXPECT_NE(why("a=127.0.0.1:0>-,rate_mbit=nan").find("needs a number"), std::string::npos);
}

TEST(Schedule, ParsesTimesActionsAndRoutes) {
  std::vector<ScheduledFault> faults;
  ASSERT_TRUE(parse_schedule("5s:reset:a,250ms:blackhole:b,1.5s:heal:a", &faults));
  ASSERT_EQ(faults.size(), 3u);
  EXPECT_EQ(faults[0].at, 5000ms);
  EXPECT_EQ(faults[1].at, 250ms);
  EXPECT_EQ(faults[1].action, "blackhole");
  EXPECT_EQ(faults[2].at, 1500ms);
  EXPECT_EQ(faults[2].route, "a");
  EXPECT_FALSE(parse_schedule("5:reset:a", &faults));
  EXPECT_FALSE(parse_schedule("5s:reset", &faults));
  EXPECT_FALSE(parse_schedule("5s:melt:a", &faults));
}

TEST(RateLimiter, HoldsTheLongRunRateAfterASmallBurst) {
  RateLimiter limiter;
  limiter.set_rate(10e6);  // 10 MB/s
  const Clock::time_point t0 = Clock::now();
  Clock::time_point last = t0;
  const size_t piece = limiter.piece_bytes();
  EXPECT_EQ(piece, 20'000u);                                         // 2 ms of the rate
  for (int i = 0; i < 1000; ++i) last = limiter.reserve(piece, t0);  // 20 MB asked at once
  const double seconds = std::chrono::duration<double>(last - t0).count();
  // 20 MB at 10 MB/s: the last piece may start after ~2 s less the 20 ms burst and its own length.
  EXPECT_NEAR(seconds, 2.0 - 0.020 - 0.002, 0.001);
}

TEST(RateLimiter, ServesReservationsInOrderSoSendersAlternate) {
  RateLimiter limiter;
  limiter.set_rate(1e6);
  const Clock::time_point t0 = Clock::now();
  // 30 ms pieces, larger than the 20 ms burst: each starts when the one reserved before it ends.
  const auto a1 = limiter.reserve(30'000, t0), b1 = limiter.reserve(30'000, t0);
  const auto a2 = limiter.reserve(30'000, t0), b2 = limiter.reserve(30'000, t0);
  EXPECT_EQ(a1, t0);
  EXPECT_EQ(b1 - t0, 10ms);
  EXPECT_EQ(a2 - b1, 30ms);
  EXPECT_EQ(b2 - a2, 30ms);
  RateLimiter unlimited;
  EXPECT_EQ(unlimited.reserve(1 << 20, t0), t0);
}

TEST(DelayModel, StaysWithinLatencyPlusMinusJitterAndNeverGoesBack) {
  LinkShape shape;
  shape.latency_ms = 10;
  shape.jitter_ms = 4;
  DelayModel model(3);
  const Clock::time_point t0 = Clock::now();
  Clock::time_point prev{};
  double min_ms = 1e9, max_ms = 0;
  for (int i = 0; i < 2000; ++i) {
    const Clock::time_point now = t0 + std::chrono::microseconds(500 * i);
    const Clock::time_point r = model.release_time(now, shape);
    EXPECT_GE(r, prev);  // in order
    prev = r;
    const double d = std::chrono::duration<double, std::milli>(r - now).count();
    min_ms = std::min(min_ms, d);
    max_ms = std::max(max_ms, d);
  }
  EXPECT_GE(min_ms, 6.0);
  EXPECT_LE(max_ms, 14.0 + 1e-6);
  EXPECT_GT(max_ms - min_ms, 4.0);  // it does jitter
}

TEST(DelayModel, TheSameSeedGivesTheSameDelays) {
  LinkShape shape;
  shape.jitter_ms = 5;
  shape.latency_ms = 5;
  DelayModel a(11), b(11), c(12);
  const Clock::time_point t0 = Clock::now();
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto now = t0 + std::chrono::milliseconds(20 * i);  // far apart: no in-order clamping
    const auto ra = a.release_time(now, shape);
    EXPECT_EQ(ra, b.release_time(now, shape));
    differs |= ra != c.release_time(now, shape);
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace longhaul::wanem
