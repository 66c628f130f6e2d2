// The staging pipeline (gpu/staging_pipeline.hpp) on the CUDA copy engine, driven directly as an
// operation drives it: the segments of a send-only chunk arrive as the CPU encoder's bytes, the
// others as their values, and result segments handed over as final bytes land on the device as
// the CPU decoder's values. (The collectives' tests cannot tell an encoding on the device from
// one on the host: both give the same bits. This one counts.) Skipped, with the reason, where
// there is no CUDA device.
#include "gpu/staging_pipeline.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <vector>

#include "collective/partition.hpp"
#include "gpu/copy_engine.hpp"
#include "gpu/pinned_pool.hpp"
#include "quant/codec.hpp"
#include "tests/unit/gpu/device_buffer.hpp"
#include "tests/unit/gpu/normals.hpp"

namespace {

using longhaul::Status;
using longhaul::collective::InputPlan;
using longhaul::collective::Partition;
using longhaul::gpu::testing::DeviceBuffer;
using longhaul::gpu::testing::normals;
namespace gpu = longhaul::gpu;
namespace quant = longhaul::quant;

std::vector<std::byte> encoded(const float* values, std::size_t count, quant::Codec codec) {
  std::vector<std::byte> bytes(*quant::encoded_size(count, codec));
  EXPECT_TRUE(quant::encode({values, count}, bytes, codec).is_ok());
  return bytes;
}

TEST(GpuStaging, SendOnlySegmentsAreEncodedAndResultsDecodedOnTheDevice) {
  LH_SKIP_WITHOUT_CUDA();
  const quant::Codec codec = quant::Codec::kU8;
  const std::size_t count = (3u << 20) + 7, members = 2, segment = 1u << 18;
  const std::vector<float> values = normals(count, 1);
  DeviceBuffer input(count * sizeof(float)), output(count * sizeof(float));
  input.upload(values);
  auto slot = gpu::acquire_pinned(count * sizeof(float));
  ASSERT_TRUE(slot.is_ok()) << slot.status().to_string();
  auto engine = gpu::cuda_copy_engine(input.as<void>());
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  EXPECT_TRUE((*engine)->runs_codec(codec, input.as<void>()));
  EXPECT_FALSE((*engine)->runs_codec(quant::Codec::kBf16, input.as<void>()));
  EXPECT_FALSE((*engine)->runs_codec(codec, values.data())) << "host memory is not the device's";

  auto pipeline = gpu::StagingPipeline::create(*engine, {.source = input.as<void>(),
                                                         .source_count = count,
                                                         .slot = (*slot)->data(),
                                                         .bytes = count * sizeof(float),
                                                         .element_size = sizeof(float),
                                                         .destination = output.as<void>(),
                                                         .slot_owner = *slot});
  const Partition part(count, members, segment);
  const std::size_t order[] = {1, 0}, send_only[] = {1};
  pipeline->begin(
      {.part = part, .chunk_order = order, .send_only_chunks = send_only, .codec = codec}, {});
  std::promise<void> all_in;
  std::atomic<std::size_t> left{members * part.segments()};
  for (std::size_t chunk = 0; chunk < members; ++chunk)
    for (std::size_t seg = 0; seg < part.segments(); ++seg)
      pipeline->when_input_ready(chunk, seg, [&](Status s) {
        EXPECT_TRUE(s.is_ok()) << s.to_string();
        if (--left == 0) all_in.set_value();
      });
  all_in.get_future().wait();

  std::size_t send_only_segments = 0;
  for (std::size_t chunk = 0; chunk < members; ++chunk)
    for (std::size_t seg = 0; seg < part.segments(); ++seg) {
      const auto r = part.segment(chunk, seg);
      if (r.count == 0) continue;
      const auto got = pipeline->encoded_input(chunk, seg);
      if (chunk == 1) {
        ++send_only_segments;
        const auto want = encoded(values.data() + r.begin, r.count, codec);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << "segment " << seg;
      } else {
        EXPECT_TRUE(got.empty());
        EXPECT_EQ(std::memcmp((*slot)->data() + r.begin * sizeof(float), values.data() + r.begin,
                              r.count * sizeof(float)),
                  0)
            << "chunk 0 arrives as values";
      }
    }
  EXPECT_EQ(pipeline->counts().input_encoded, send_only_segments);

  // Every result segment handed over as final bytes in pageable memory, as an operation's
  // scratch holds them: the device ends with their decoding.
  std::vector<float> doubled(values);
  for (float& v : doubled) v *= 2.0f;
  std::vector<std::vector<std::byte>> finals;
  finals.reserve(members * part.segments());
  std::vector<float> want(count);
  for (std::size_t chunk = 0; chunk < members; ++chunk)
    for (std::size_t seg = 0; seg < part.segments(); ++seg) {
      const auto r = part.segment(chunk, seg);
      if (r.count == 0) continue;
      finals.push_back(encoded(doubled.data() + r.begin, r.count, codec));
      ASSERT_TRUE(quant::decode(finals.back(), {want.data() + r.begin, r.count}, codec).is_ok());
      pipeline->result_final(chunk, seg, finals.back());
    }
  ASSERT_TRUE(pipeline->land().is_ok());
  const auto got = output.download<float>();
  EXPECT_EQ(std::memcmp(got.data(), want.data(), count * sizeof(float)), 0);
  EXPECT_EQ(pipeline->counts().output_decoded, finals.size());
}

}  // namespace
