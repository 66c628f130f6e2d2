#include "sync/options.hpp"

#include <gtest/gtest.h>

namespace longhaul::sync {
namespace {

EngineOptions valid() {
  static std::vector<float> w(100);
  EngineOptions o;
  o.ranges = {{w.data(), 100, quant::DType::kF32}};
  return o;
}

TEST(EngineOptions, EveryBadOptionIsRefusedWithItsReason) {
  EXPECT_TRUE(validate(valid()).is_ok());
  auto o = valid();
  o.sync_every = 0;
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o = valid();
  o.delay = o.sync_every;  // τ ≥ H
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o = valid();
  o.method = Method::kCo2;
  o.delay = 1;
  EXPECT_NE(validate(o).message().find("one round later"), std::string::npos);
  o = valid();
  o.method = Method::kEager;
  o.fragments = 2;
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o = valid();
  o.mix = 1.0f;
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o = valid();
  o.nesterov.lr = -1.0f;
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o = valid();
  o.method = Method::kCo2;
  o.co2.gap_penalty = 0.5f;
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o = valid();
  o.max_attempts = 0;
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o = valid();
  o.codec = static_cast<quant::Codec>(99);
  EXPECT_FALSE(validate(o).is_ok());
}

TEST(EngineOptions, TheConfigurationTagDiffersWhenAnythingThatMattersDiffers) {
  std::vector<float> w(100);
  auto layout = Layout::make({{w.data(), 100, quant::DType::kF32}}, {}, 1);
  ASSERT_TRUE(layout.is_ok());
  const auto base = config_tag(valid(), *layout);
  auto o = valid();
  o.nesterov.lr = 0.7000001f;
  EXPECT_NE(config_tag(o, *layout), base);
  o = valid();
  o.sync_every = 101;
  EXPECT_NE(config_tag(o, *layout), base);
  o = valid();
  o.deadline = std::chrono::milliseconds(5);  // local policy: not part of the shared state
  EXPECT_EQ(config_tag(o, *layout), base);
  o = valid();
  o.sparse.topk_per_chunk = 7;  // not used while the sparse codec is off: the tag stays
  EXPECT_EQ(config_tag(o, *layout), base);
  o.sparse.enabled = true;
  const auto sparse = config_tag(o, *layout);
  EXPECT_NE(sparse, base);
  o.sparse.chunk = 1024;
  EXPECT_NE(config_tag(o, *layout), sparse);
}

TEST(EngineOptions, TheSparseCodecIsCheckedWithItsMethodAndParameters) {
  auto o = valid();
  o.sparse.enabled = true;
  EXPECT_TRUE(validate(o).is_ok());
  o.method = Method::kEager;
  EXPECT_EQ(validate(o).code(), LH_ERR_UNSUPPORTED);
  o = valid();
  o.sparse.enabled = true;
  o.codec = quant::Codec::kE3M0;
  EXPECT_NE(validate(o).message().find("one or the other"), std::string::npos);
  o = valid();
  o.sparse = {true, 64, 65536};
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
  o.sparse = {true, 0, 4096};
  EXPECT_EQ(validate(o).code(), LH_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace longhaul::sync
