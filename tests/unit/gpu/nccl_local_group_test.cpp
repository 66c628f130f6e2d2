// The NCCL local group (gpu/nccl_local_group.hpp). NCCL refuses two ranks on one GPU, so on the
// one-GPU accelerator machine this runs a node of one rank: the group forms over its shared-memory
// bootstrap, its reduce-scatter and all-gather move device buffers through NCCL (the chunk to the
// host shard and back), and an abort ends it. Skips without a CUDA device; without NCCL it checks
// the error names what was tried.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "gpu/nccl_library.hpp"
#include "gpu/nccl_local_group.hpp"
#include "node/shm_local_group.hpp"

namespace longhaul::gpu {
namespace {

using testing::DeviceBuffer;
using namespace std::chrono_literals;

Result<std::unique_ptr<node::LocalGroup>> node_of_one() {
  node::ShmLocalGroupOptions o;
  o.name = "/lh-nccl-test-" + std::to_string(getpid());
  auto shared = node::ShmLocalGroup::create(o);
  if (!shared) return shared.status();
  return make_nccl_local_group(std::move(*shared), 0, 20s);
}

TEST(NcclLocalGroup, ANodeOfOneRankMovesDeviceBuffersThroughNccl) {
  LH_SKIP_WITHOUT_CUDA();
  if (auto nccl = load_nccl(); !nccl) {
    // scripts/gpu-check.sh points LONGHAUL_NCCL_LIBRARY at the machine's NCCL: not loading it
    // there is a failure, not a reason to skip.
    if (std::getenv("LONGHAUL_NCCL_LIBRARY") != nullptr)
      FAIL() << "LONGHAUL_NCCL_LIBRARY is set but NCCL did not load: " << nccl.status().message();
    GTEST_SKIP() << nccl.status().message();
  }
  auto group = node_of_one();
  ASSERT_TRUE(group) << group.status().to_string();
  for (size_t count : {size_t{1}, size_t{1000003}}) {
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 977) * 0.25f - 3.0f;
    DeviceBuffer input(count * sizeof(float)), output(count * sizeof(float));
    input.upload(host);
    std::vector<float> shard(count);
    ASSERT_TRUE((*group)->reduce_scatter(input.as<float>(), shard.data(), count, quant::DType::kF32,
                                         quant::ReduceOp::kSum));
    EXPECT_EQ(shard, host);
    for (float& v : shard) v *= 2;
    ASSERT_TRUE((*group)->all_gather(shard.data(), output.as<float>(), count, quant::DType::kF32));
    EXPECT_EQ(output.download<float>(), shard);
  }
  (*group)->abort(aborted_error("the test's abort"));
  DeviceBuffer one(sizeof(float));
  float shard = 0;
  const Status s = (*group)->reduce_scatter(one.as<float>(), &shard, 1, quant::DType::kF32,
                                            quant::ReduceOp::kSum);
  EXPECT_EQ(s.code(), LH_ERR_ABORTED) << s.to_string();
}

TEST(NcclLocalGroup, WithoutADeviceOrNcclItSaysWhy) {
  if (cuda_available() && load_nccl()) GTEST_SKIP() << "this machine has a device and NCCL";
  auto group = node_of_one();
  ASSERT_FALSE(group);
  EXPECT_EQ(group.status().code(), LH_ERR_UNSUPPORTED) << group.status().to_string();
}

}  // namespace
}  // namespace longhaul::gpu
