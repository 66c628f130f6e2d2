// An all-gather and a broadcast through the GPU layer's staging pipeline without a device, as
// staging_pipeline_test.cpp runs the all-reduce: this member's contribution is copied in segment by
// segment while the schedule runs (quantized, encoded by the engine, so only encoded bytes are
// copied), and the output moves to the caller's buffer as its segments land (quantized, as the
// bytes they decode from), or after success where the caller keeps the restore.
//
// - Every schedule, N = 2..4, plain and u8, late copies and the host engine: the bytes of the same
//   gather in host memory, the slot starting as NaN.
// - A broadcast (only the root contributes) does the same.
// - A member dying while copies are pending fails everyone and leaves the callers' outputs as they
//   were.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <utility>

#include "collective/engine.hpp"
#include "collective/gather_plan.hpp"
#include "gpu/copy_engine.hpp"
#include "gpu/staging_pipeline.hpp"
#include "group_fixture.hpp"
#include "late_copies.hpp"
#include "test_values.hpp"

namespace longhaul::collective {
namespace {

using gpu::CopyEngine;
using gpu::PipelineBuffers;
using gpu::StagingPipeline;
using quant::Codec;
using testing::InProcessGroup;
using testing::LateCopies;
using testing::Members;
using testing::random_floats;

using Case = testing::ScheduleCase;

// One member's buffers: the caller's contribution (empty: none) and output, and the slot.
struct Staged {
  std::vector<float> input;
  std::vector<float> output;
  std::vector<float> slot;
  std::shared_ptr<StagingPipeline> pipeline;
};

size_t offset_of(const std::vector<size_t>& counts, size_t rank) {
  size_t offset = 0;
  for (size_t r = 0; r < rank; ++r) offset += counts[r];
  return offset;
}

GatherSpec plain_spec(const Case& c, const std::vector<size_t>& counts) {
  GatherSpec spec;
  spec.counts = counts;
  spec.codec = c.codec;
  spec.schedule = c.schedule;
  spec.segment_bytes = 1024;
  return spec;
}

// As gpu::stage_device_buffers stages a gather of device buffers: the contribution copied to its
// place in the slot, the output written as segments land or (`restore`) after success.
GatherSpec staged_spec(const Case& c, const std::vector<size_t>& counts, size_t rank, Staged& m,
                       std::shared_ptr<CopyEngine> engine, bool restore) {
  const size_t total = offset_of(counts, counts.size());
  const size_t own = offset_of(counts, rank);
  m.slot.assign(total, std::numeric_limits<float>::quiet_NaN());
  PipelineBuffers buffers{.source = m.input.empty() ? nullptr : m.input.data(),
                          .source_first = own,
                          .source_count = counts[rank],
                          .slot = reinterpret_cast<std::byte*>(m.slot.data()),
                          .bytes = total * sizeof(float),
                          .element_size = sizeof(float),
                          .destination = m.output.data(),
                          .destination_after_success = restore,
                          .slot_owner = nullptr};
  m.pipeline = StagingPipeline::create(std::move(engine), buffers);
  GatherSpec spec = plain_spec(c, counts);
  spec.input = m.input.empty() ? nullptr : m.slot.data() + own;
  spec.output = m.slot.data();
  spec.restore_output = false;
  spec.segment_staging = m.pipeline;
  spec.land_output = [p = m.pipeline] { return p->land(); };
  return spec;
}

// The outputs of the same gather of host memory.
std::vector<std::vector<float>> host_gather(const Case& c, const std::vector<size_t>& counts,
                                            const std::vector<std::vector<float>>& inputs) {
  InProcessGroup group(c.members);
  Members members(c.members);
  std::vector<std::vector<float>> outputs(c.members,
                                          std::vector<float>(offset_of(counts, c.members)));
  std::vector<std::shared_ptr<GatherOp>> ops;
  for (size_t r = 0; r < c.members; ++r) {
    GatherSpec spec = plain_spec(c, counts);
    spec.input = inputs[r].empty() ? nullptr : inputs[r].data();
    spec.output = outputs[r].data();
    auto op = members.engines[r]->gather(group.view(r), spec);
    EXPECT_TRUE(op.is_ok()) << op.status().to_string();
    if (!op) return {};
    ops.push_back(*op);
  }
  for (auto& op : ops) EXPECT_TRUE(op->wait().is_ok());
  return outputs;
}

// What member `rank` moves: quantized, its own segments in encoded, and every segment of the
// output out as the bytes it decodes from, unless the output lands after success (`restore`: then
// its values, in one copy). (segments encoded in, bytes in, segments decoded out)
struct Moved {
  size_t encoded_in = 0;
  size_t bytes_in = 0;
  size_t decoded_out = 0;
};
Moved expected_moves(const Case& c, const std::vector<size_t>& counts, size_t rank, bool restore) {
  const GatherPlan plan(c.schedule, c.members, rank, plain_spec(c, counts));
  Moved m;
  for (size_t chunk = 0; chunk < c.members; ++chunk)
    for (size_t seg = 0; seg < plan.segments(); ++seg) {
      if (plan.segment(chunk, seg).count == 0) continue;
      // Encoded only where that is no more bytes (in) or fewer (out) than the values.
      const bool quantized = c.codec != Codec::kNone;
      const bool in_encoded = quantized && plan.wire_bytes(chunk, seg) <= plan.bytes(chunk, seg);
      const bool out_encoded = quantized && plan.wire_bytes(chunk, seg) < plan.bytes(chunk, seg);
      if (chunk == rank) {
        m.encoded_in += in_encoded ? 1 : 0;
        m.bytes_in += in_encoded ? plan.wire_bytes(chunk, seg) : plan.bytes(chunk, seg);
      }
      m.decoded_out += out_encoded && !restore ? 1 : 0;
    }
  return m;
}

// Runs the gather of `inputs` with every member staged; checks each output against the host's.
void run_staged(const Case& c, const std::vector<size_t>& counts,
                const std::vector<std::vector<float>>& inputs) {
  const auto expected = host_gather(c, counts, inputs);
  runtime::WorkerPool copy_workers(2);
  for (auto [late, restore] : {std::pair{true, false}, {true, true}, {false, false}}) {
    SCOPED_TRACE(::testing::Message() << (late ? "late copies" : "the host engine")
                                      << (restore ? ", with the restore" : ""));
    std::shared_ptr<CopyEngine> engine;
    if (late)
      engine = std::make_shared<LateCopies>();
    else
      engine = std::make_shared<gpu::HostCopyEngine>(copy_workers);
    std::vector<Staged> staged(c.members);
    InProcessGroup group(c.members);
    Members members(c.members);
    std::vector<std::shared_ptr<GatherOp>> ops;
    for (size_t r = 0; r < c.members; ++r) {
      staged[r].input = inputs[r];
      staged[r].output.assign(offset_of(counts, c.members), -1.0f);
      auto op = members.engines[r]->gather(group.view(r),
                                           staged_spec(c, counts, r, staged[r], engine, restore));
      ASSERT_TRUE(op.is_ok()) << op.status().to_string();
      ops.push_back(*op);
    }
    for (auto& op : ops) ASSERT_TRUE(op->wait().is_ok());
    for (size_t r = 0; r < c.members; ++r) {
      const auto& got = staged[r].output;
      EXPECT_EQ(std::memcmp(got.data(), expected[r].data(), got.size() * sizeof(float)), 0)
          << "member " << r;
      const auto counted = staged[r].pipeline->counts();
      const Moved want = expected_moves(c, counts, r, restore);
      EXPECT_EQ(counted.input_encoded, want.encoded_in) << "member " << r;
      EXPECT_EQ(counted.input_bytes, want.bytes_in) << "member " << r;
      EXPECT_EQ(counted.output_decoded, want.decoded_out) << "member " << r;
      if (restore) {
        EXPECT_EQ(counted.output_at_land, 1u) << "the whole output landed in one copy";
      } else {
        EXPECT_EQ(counted.output_at_land, 0u) << "every segment went as it landed";
      }
    }
  }
}

class GatherStagingRuns : public ::testing::TestWithParam<Case> {};

TEST_P(GatherStagingRuns, GiveTheBitsOfAHostAllGather) {
  const Case c = GetParam();
  std::vector<size_t> counts;
  std::vector<std::vector<float>> inputs;
  for (size_t r = 0; r < c.members; ++r) {
    counts.push_back(700 + 300 * r);  // uneven, several segments each
    inputs.push_back(random_floats(counts.back(), r + 1));
  }
  run_staged(c, counts, inputs);
}

// Contributions of 257 floats in segments of 256: each ends in a segment of one float, whose u8
// encoding is larger than its value, so it travels in and out as a value.
TEST_P(GatherStagingRuns, ASegmentWhoseEncodingIsLargerThanItsValuesMovesAsValues) {
  const Case c = GetParam();
  const std::vector<size_t> counts(c.members, 257);
  std::vector<std::vector<float>> inputs;
  for (size_t r = 0; r < c.members; ++r) inputs.push_back(random_floats(257, r + 9));
  run_staged(c, counts, inputs);
}

TEST_P(GatherStagingRuns, GiveTheBitsOfAHostBroadcast) {
  const Case c = GetParam();
  const size_t root = c.members - 1;
  std::vector<size_t> counts(c.members, 0);
  counts[root] = 3001;
  std::vector<std::vector<float>> inputs(c.members);
  inputs[root] = random_floats(3001, 77);
  run_staged(c, counts, inputs);
}

INSTANTIATE_TEST_SUITE_P(Schedules, GatherStagingRuns,
                         ::testing::ValuesIn(testing::schedule_cases()),
                         testing::schedule_case_name);

TEST(GatherStaging, AMemberDyingWhileCopiesArePendingFailsEveryoneAndKeepsTheOutputs) {
  for (Schedule schedule : {Schedule::kRing, Schedule::kDirect}) {
    const Case c{schedule, 3, Codec::kU8};
    const std::vector<size_t> counts(c.members, 1 << 16);
    std::vector<Staged> staged(c.members);
    auto engine = std::make_shared<LateCopies>();
    InProcessGroup group(c.members);
    Members members(c.members);
    // Member 1 dies before it joins, so the others cannot finish before it is gone.
    const size_t survivors[] = {0, 2};
    std::vector<std::shared_ptr<GatherOp>> ops(c.members);
    for (size_t r : survivors) {
      staged[r].input.assign(1 << 16, 2.0f);
      staged[r].output.assign(3 << 16, 7.0f);
      auto op = members.engines[r]->gather(group.view(r),
                                           staged_spec(c, counts, r, staged[r], engine, true));
      ASSERT_TRUE(op.is_ok()) << op.status().to_string();
      ops[r] = *op;
    }
    group.kill(1);
    for (size_t r : survivors) {
      const Status s = ops[r]->wait();
      EXPECT_TRUE(s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED) << s.to_string();
      EXPECT_EQ(staged[r].output, std::vector<float>(3 << 16, 7.0f))
          << schedule_name(schedule) << " member " << r;
    }
  }
}

}  // namespace
}  // namespace longhaul::collective
