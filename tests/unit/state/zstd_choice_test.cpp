#include "state/zstd_choice.hpp"

#include <gtest/gtest.h>

namespace longhaul::state {
namespace {

using Clock = ZstdChoice::Clock;
using std::chrono::milliseconds;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kMs = 1'000'000;  // ns

// One raw chunk of `bytes` from t to t + ms.
void deliver_raw(ZstdChoice& choice, Clock::time_point& t, int ms, uint64_t bytes) {
  choice.raw().started(t);
  t += milliseconds(ms);
  choice.raw().ended(t, bytes);
}

TEST(ZstdChoice, ProbesZstdOnceThenGoesRawUntilBothAreMeasured) {
  ZstdChoice choice;
  auto t = Clock::now();
  EXPECT_TRUE(choice.probe_due());
  EXPECT_TRUE(choice.next_compressed(t));
  choice.compressed_started();
  EXPECT_FALSE(choice.probe_due());
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(choice.next_compressed(t)) << "probe in flight";
  choice.compressed_ended(4 * kMiB, 10 * kMs, 4 * kMs);
  EXPECT_FALSE(choice.next_compressed(t)) << "no raw chunk has delivered yet";
  // A failed probe does not count: the next compressible chunk probes again.
  ZstdChoice failed;
  EXPECT_TRUE(failed.next_compressed(t));
  failed.compressed_started();
  failed.compressed_ended(0, 0, 0);
  EXPECT_TRUE(failed.next_compressed(t));
}

TEST(ZstdChoice, ZstdRateIsTheSlowerOfCompressingAndDecompressing) {
  ZstdChoice choice;
  choice.compressed_started();
  choice.compressed_ended(4 * kMiB, 20 * kMs, 5 * kMs);
  EXPECT_NEAR(choice.zstd_bytes_per_second(), 4.0 * kMiB / 0.020, 1.0);
  choice.compressed_started();
  choice.compressed_ended(4 * kMiB, 20 * kMs, 60 * kMs);
  EXPECT_NEAR(choice.zstd_bytes_per_second(), 8.0 * kMiB / 0.065, 1.0);
}

// A fast link (raw: 8 MiB in 4 ms, 2 GB/s) against zstd at 4 MiB per 10 ms: raw every time after
// the probe, never re-probed.
TEST(ZstdChoice, OnAFastLinkRawWinsAndZstdIsNotTriedAgain) {
  ZstdChoice choice;
  auto t = Clock::now();
  ASSERT_TRUE(choice.next_compressed(t));
  choice.compressed_started();
  choice.compressed_ended(4 * kMiB, 10 * kMs, 2 * kMs);
  deliver_raw(choice, t, 4, 8 * kMiB);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(choice.next_compressed(t));
}

// zstd at 4 MiB per 10 ms (0.42 GB/s) wins against a link of 8 MiB per 30 ms (0.28 GB/s): a raw
// chunk after 8, 16, 32, ... compressible chunks, to notice a faster link. Against a slow link (8
// MiB in 67 ms, 1 Gbit/s; zstd more than twice as fast) no raw chunk at all.
TEST(ZstdChoice, WhereZstdWinsRawIsReprobedOnlyWhenTheMarginIsNarrow) {
  for (int raw_ms : {30, 67}) {
    ZstdChoice choice;
    auto t = Clock::now();
    ASSERT_TRUE(choice.next_compressed(t));  // chunk 0
    choice.compressed_started();
    choice.compressed_ended(4 * kMiB, 10 * kMs, 2 * kMs);
    deliver_raw(choice, t, raw_ms, 8 * kMiB);
    std::vector<uint64_t> raw;
    for (uint64_t n = 1; n < 200; ++n)
      if (!choice.next_compressed(t)) raw.push_back(n);
    const std::vector<uint64_t> want =
        raw_ms == 30 ? std::vector<uint64_t>{8, 24, 56, 120} : std::vector<uint64_t>{};
    EXPECT_EQ(raw, want) << "raw chunk of 8 MiB in " << raw_ms << " ms";
  }
}

TEST(ZstdChoice, TheLinksRateCountsOverlappingChunksOnce) {
  BusyRate rate;
  auto t = Clock::now();
  // Two chunks overlapping in [0, 20] ms: 20 ms busy, not 30.
  rate.started(t);
  rate.started(t + milliseconds(10));
  rate.ended(t + milliseconds(10), 1000);
  rate.ended(t + milliseconds(20), 1000);
  EXPECT_NEAR(rate.bytes_per_second(t + milliseconds(100)), 2000 / 0.020, 1e-6);
  // A failed chunk adds busy time but no bytes.
  rate.started(t + milliseconds(100));
  rate.ended(t + milliseconds(120), 0);
  EXPECT_NEAR(rate.bytes_per_second(t + milliseconds(200)), 2000 / 0.040, 1e-6);
  EXPECT_TRUE(rate.measured());
}

TEST(ZstdChoice, FixedPoliciesNeverMeasure) {
  ZstdChoice never(ZstdPolicy::kNever), always(ZstdPolicy::kAlways);
  const auto t = Clock::now();
  EXPECT_FALSE(never.probe_due());
  EXPECT_FALSE(always.probe_due());
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(never.next_compressed(t));
    EXPECT_TRUE(always.next_compressed(t));
  }
}

}  // namespace
}  // namespace longhaul::state
