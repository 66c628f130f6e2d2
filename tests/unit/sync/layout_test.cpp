#include "sync/layout.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "quant/half.hpp"
#include "runtime/worker_pool.hpp"

namespace longhaul::sync {
namespace {

TEST(Layout, WithoutPiecesRangeIGoesToFragmentIModF) {
  std::vector<float> a(10), b(20), c(30);
  auto layout = Layout::make({{a.data(), 10, quant::DType::kF32},
                              {b.data(), 20, quant::DType::kF32},
                              {c.data(), 30, quant::DType::kF32}},
                             {}, 2);
  ASSERT_TRUE(layout.is_ok());
  EXPECT_EQ(layout->fragment_size(0), 40u);  // ranges 0 and 2
  EXPECT_EQ(layout->fragment_size(1), 20u);
  EXPECT_EQ(layout->largest_fragment(), 40u);
  EXPECT_EQ(layout->total_elements(), 60u);
}

TEST(Layout, ReadsAndMergesPiecesInOrderAndRoundsBf16ToNearestEven) {
  runtime::WorkerPool workers(2);
  std::vector<float> f32(100);
  std::iota(f32.begin(), f32.end(), 0.0f);
  std::vector<uint16_t> bf16(50);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = quant::f32_to_bf16(static_cast<float>(i));
  auto layout =
      Layout::make({{f32.data(), 100, quant::DType::kF32}, {bf16.data(), 50, quant::DType::kBF16}},
                   {{0, 1, 10, 5}, {0, 0, 90, 10}, {1, 0, 0, 90}}, 2);
  ASSERT_TRUE(layout.is_ok());
  std::vector<float> got(15);
  layout->read(0, got, workers);
  EXPECT_EQ(got, (std::vector<float>{10, 11, 12, 13, 14, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99}));
  std::vector<float> global(15, 1.0f + 1.0f / 256.0f + 1.0f / 512.0f);  // between 1 and 1 + 2^-7
  layout->merge(0, global, 0.0f, workers);
  EXPECT_EQ(quant::bf16_to_f32(bf16[10]), 1.0f + 1.0f / 128.0f);  // the nearest bf16
  EXPECT_EQ(f32[95], global[10]);
  EXPECT_EQ(f32[0], 0.0f);  // not in fragment 0
}

TEST(Layout, BadLayoutsAreRefusedWithTheirReason) {
  std::vector<float> a(10);
  std::vector<double> d(10);
  const ParamRange r{a.data(), 10, quant::DType::kF32};
  EXPECT_EQ(Layout::make({}, {}, 1).status().code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Layout::make({{d.data(), 10, quant::DType::kF64}}, {}, 1).status().code(),
            LH_ERR_UNSUPPORTED);
  EXPECT_EQ(Layout::make({{nullptr, 10, quant::DType::kF32}}, {}, 1).status().code(),
            LH_ERR_INVALID_ARGUMENT);
  auto overlap = Layout::make({r}, {{0, 0, 0, 6}, {0, 0, 5, 5}}, 1);
  ASSERT_FALSE(overlap.is_ok());
  EXPECT_NE(overlap.status().message().find("overlap"), std::string::npos);
  auto outside = Layout::make({r}, {{0, 0, 8, 5}}, 1);
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.status().message().find("exceeds"), std::string::npos);
  EXPECT_EQ(Layout::make({r}, {{1, 0, 0, 5}}, 1).status().code(), LH_ERR_INVALID_ARGUMENT);
  auto empty_fragment = Layout::make({r}, {{0, 0, 0, 10}}, 2);
  ASSERT_FALSE(empty_fragment.is_ok());
  EXPECT_NE(empty_fragment.status().message().find("fragment 1"), std::string::npos);
}

}  // namespace
}  // namespace longhaul::sync
