// Where there is no CUDA device (every CPU CI machine) or the build has no GPU layer, the library
// still runs, every pointer is host memory, and whatever needs a device says "no CUDA device".
// Skipped on a machine with a device (the gpu-labelled tests cover it there).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <longhaul/longhaul.h>

#include "collective/allreduce_spec.hpp"
#include "gpu/codec_device.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/pinned_pool.hpp"
#include "gpu/staged_collectives.hpp"

namespace longhaul::gpu {
namespace {

void expect_no_device(const Status& s) {
  EXPECT_EQ(s.code(), LH_ERR_UNSUPPORTED) << s.message();
  EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s.message();
}

class NoDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_available()) GTEST_SKIP() << "a CUDA device is present here";
  }
};

TEST_F(NoDevice, EveryPointerIsHostMemoryAndHostAllReducesAreLeftAlone) {
  std::vector<float> x(8);
  EXPECT_FALSE(is_device_pointer(x.data()));
  EXPECT_EQ(memory_of(x.data(), Memory::kAuto), Memory::kHost);
  collective::AllReduceSpec spec;
  spec.input = x.data();
  spec.output = x.data();
  spec.count = x.size();
  auto staged = stage_device_buffers(spec, Memory::kAuto);
  ASSERT_TRUE(staged.is_ok());
  EXPECT_FALSE(*staged);
  EXPECT_EQ(spec.input, x.data());
  EXPECT_FALSE(spec.land_output);
}

TEST_F(NoDevice, WhatNeedsADeviceSaysThereIsNone) {
  expect_no_device(cuda_available());
  std::vector<float> x(8);
  collective::AllReduceSpec spec;
  spec.input = x.data();
  spec.output = x.data();
  spec.count = x.size();
  expect_no_device(stage_device_buffers(spec, Memory::kCuda).status());
  expect_no_device(acquire_pinned(1024).status());
  expect_no_device(copy_to_host(x.data(), x.data(), 32));
  std::vector<std::byte> out(1024);
  expect_no_device(encode_on_device(x.data(), x.size(), out.data(), quant::Codec::kU8));
}

TEST(GpuOptions, TheMemoryKindDefaultsToAuto) {
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  EXPECT_EQ(o.memory, LH_MEMORY_AUTO);
}

}  // namespace
}  // namespace longhaul::gpu
