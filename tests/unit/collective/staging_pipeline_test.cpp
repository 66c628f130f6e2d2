// The GPU layer's staging pipeline (gpu/staging_pipeline.hpp) without a device: the same
// pipeline a device tensor goes through, with the caller's "device" buffers in host memory, its
// copies made by the host engine (gpu::HostCopyEngine) or by one whose copies finish late, in an
// order of their own, on threads of their own.
//
// - Every schedule gives the bits a plain host all-reduce gives, though no input segment is in the
//   slot when the schedule starts (the slot starts as NaN): each read waits for its own copy.
//   Quantized, the segments a member only sends arrive encoded by the engine, and only their
//   encoded bytes are copied; with error feedback they arrive as values.
// - A result written segment by segment (out of place) is written while the operation runs.
// - A reduce-scatter gives each member the host reduce-scatter's part.
// - A member dying while copies are pending fails everyone without a hang, and leaves a caller's
//   in-place buffer as it was; a copy failing fails the operation with the copy's error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "collective/engine.hpp"
#include "collective/step_plan.hpp"
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

// One member's buffers: the caller's input (and output, when in place), and the slot.
struct Staged {
  std::vector<float> caller;
  std::vector<float> result;  // out of place: the caller's output
  std::vector<float> slot;
  std::shared_ptr<StagingPipeline> pipeline;
};

AllReduceSpec staged_spec(const Case& c, Staged& m, std::shared_ptr<CopyEngine> engine,
                          bool out_of_place) {
  m.slot.assign(m.caller.size(), std::numeric_limits<float>::quiet_NaN());
  PipelineBuffers buffers{.source = m.caller.data(),
                          .source_count = m.caller.size(),
                          .slot = reinterpret_cast<std::byte*>(m.slot.data()),
                          .bytes = m.slot.size() * sizeof(float),
                          .element_size = sizeof(float),
                          .destination = nullptr,
                          .slot_owner = nullptr};
  if (out_of_place) {
    m.result.assign(m.caller.size(), -1.0f);
    buffers.destination = m.result.data();
  } else {  // as gpu::stage_device_buffers stages an in-place device buffer with the restore
    buffers.destination = m.caller.data();
    buffers.destination_after_success = true;
  }
  m.pipeline = StagingPipeline::create(std::move(engine), buffers);
  AllReduceSpec spec;
  spec.input = spec.output = m.slot.data();
  spec.count = m.slot.size();
  spec.schedule = c.schedule;
  spec.codec = c.codec;
  spec.segment_bytes = 1024;
  spec.restore_input = false;
  spec.segment_staging = m.pipeline;
  spec.land_output = [p = m.pipeline] { return p->land(); };
  return spec;
}

// The plan of member `rank`'s all-reduce of `count` floats in `c`, as staged_spec cuts it.
StepPlan plan_of(const Case& c, size_t rank, size_t count) {
  AllReduceSpec spec;
  spec.count = count;
  spec.codec = c.codec;
  spec.segment_bytes = 1024;
  return StepPlan(c.schedule, c.members, rank, spec);
}

// What member `rank` copies in: its send-only segments encoded (where the schedule travels
// quantized), every other segment as values. (segments encoded, bytes copied)
std::pair<size_t, size_t> expected_input(const Case& c, size_t rank, size_t count) {
  const StepPlan plan = plan_of(c, rank, count);
  const auto send_only = plan.send_only_chunks();
  size_t encoded = 0;
  size_t bytes = 0;
  for (size_t chunk = 0; chunk < c.members; ++chunk)
    for (size_t seg = 0; seg < plan.segments(); ++seg) {
      if (plan.segment(chunk, seg).count == 0) continue;
      const bool ahead = c.codec != Codec::kNone &&
                         std::ranges::find(send_only, chunk) != send_only.end() &&
                         plan.wire_bytes(chunk, seg) <= plan.bytes(chunk, seg);
      encoded += ahead ? 1 : 0;
      bytes += ahead ? plan.wire_bytes(chunk, seg) : plan.bytes(chunk, seg);
    }
  return {encoded, bytes};
}

// What member `rank` moves out: quantized, every segment of the result as its final encoded bytes
// (decoded where the result goes), else its values; landing after success (in place), the values
// in one copy. (segments decoded, bytes moved)
std::pair<size_t, size_t> expected_output(const Case& c, size_t rank, size_t count,
                                          bool out_of_place) {
  if (!out_of_place) return {0, count * sizeof(float)};
  const StepPlan plan = plan_of(c, rank, count);
  size_t decoded = 0;
  size_t bytes = 0;
  for (size_t chunk = 0; chunk < c.members; ++chunk)
    for (size_t seg = 0; seg < plan.segments(); ++seg) {
      if (plan.segment(chunk, seg).count == 0) continue;
      const bool encoded =
          c.codec != Codec::kNone && plan.wire_bytes(chunk, seg) < plan.bytes(chunk, seg);
      decoded += encoded ? 1 : 0;
      bytes += encoded ? plan.wire_bytes(chunk, seg) : plan.bytes(chunk, seg);
    }
  return {decoded, bytes};
}

class StagingPipelineRuns : public ::testing::TestWithParam<Case> {};

// Runs an all-reduce of `count` random floats per member through the pipeline, with late copies
// and the host engine, in place and out of place; checks every member's bits against the host
// all-reduce's and what crossed against expected_input/expected_output.
void check_against_the_host(const Case& c, size_t count) {
  std::vector<std::vector<float>> data;
  for (size_t r = 0; r < c.members; ++r) data.push_back(random_floats(count, r + 1));
  const auto expected = testing::allreduce_in_place(c, data);

  runtime::WorkerPool copy_workers(2);
  for (auto [late, out_of_place] : {std::pair{true, false}, {true, true}, {false, false}}) {
    std::vector<Staged> staged(c.members);
    std::shared_ptr<CopyEngine> engine;
    if (late)
      engine = std::make_shared<LateCopies>();
    else
      engine = std::make_shared<gpu::HostCopyEngine>(copy_workers);
    InProcessGroup group(c.members);
    Members members(c.members);
    std::vector<std::shared_ptr<AllReduceOp>> ops;
    for (size_t r = 0; r < c.members; ++r) {
      staged[r].caller = data[r];
      auto op = members.engines[r]->allreduce(group.view(r),
                                              staged_spec(c, staged[r], engine, out_of_place));
      ASSERT_TRUE(op.is_ok()) << op.status().to_string();
      ops.push_back(*op);
    }
    for (auto& op : ops) ASSERT_TRUE(op->wait().is_ok());
    for (size_t r = 0; r < c.members; ++r) {
      const std::vector<float>& got = out_of_place ? staged[r].result : staged[r].caller;
      EXPECT_EQ(std::memcmp(got.data(), expected[r].data(), got.size() * sizeof(float)), 0)
          << "member " << r << (out_of_place ? " out of place" : " in place")
          << (late ? ", late copies" : ", the host engine");
      const auto counts = staged[r].pipeline->counts();
      EXPECT_GE(counts.input, 2 * c.members) << "one copy per segment, not one per buffer";
      const auto [encoded_segments, bytes_in] = expected_input(c, r, data[r].size());
      EXPECT_EQ(counts.input_encoded, encoded_segments)
          << "the segments member " << r << " only sends arrive encoded";
      EXPECT_EQ(counts.input_bytes, bytes_in);
      const auto [decoded_segments, bytes_out] =
          expected_output(c, r, data[r].size(), out_of_place);
      EXPECT_EQ(counts.output_decoded, decoded_segments)
          << "quantized, every result segment moving while it runs moves as its final bytes";
      EXPECT_EQ(counts.output_bytes, bytes_out);
      if (!out_of_place) {
        EXPECT_EQ(counts.output_at_land, 1u) << "the whole result landed in one copy";
      }
      if (out_of_place) {
        EXPECT_EQ(data[r], staged[r].caller) << "the input of an out-of-place operation is kept";
        EXPECT_EQ(counts.output_at_land, 0u) << "every result segment went while it ran";
        EXPECT_EQ(counts.output_overlapped, counts.input);
      }
    }
  }
}

TEST_P(StagingPipelineRuns, GiveTheBitsOfAHostAllReduce) {
  check_against_the_host(GetParam(), 5003);
}

// Chunks of 257 floats in segments of 256: every chunk ends in a segment of one float, whose u8
// encoding (9 bytes) is larger than its value, so it travels in and out as a value.
TEST_P(StagingPipelineRuns, ASegmentWhoseEncodingIsLargerThanItsValuesMovesAsValues) {
  check_against_the_host(GetParam(), 257 * GetParam().members);
}

INSTANTIATE_TEST_SUITE_P(Schedules, StagingPipelineRuns,
                         ::testing::ValuesIn(testing::schedule_cases()),
                         testing::schedule_case_name);

// A reduce-scatter through the pipeline (as gpu::stage_device_buffers stages one: the input
// copied in, this member's part landed whole after success): each member's part is the host
// reduce-scatter's, and quantized, the chunks it only sends arrive encoded.
TEST_P(StagingPipelineRuns, AReduceScatterGivesEachMemberTheHostsPart) {
  const Case c = GetParam();
  const size_t count = 4000;
  std::vector<std::vector<float>> data;
  for (size_t r = 0; r < c.members; ++r) data.push_back(random_floats(count, r + 60));
  const auto run = [&](bool staged) {
    InProcessGroup group(c.members);
    Members members(c.members);
    std::vector<std::vector<float>> inputs = data, slots(c.members), parts(c.members);
    std::vector<std::shared_ptr<StagingPipeline>> pipelines(c.members);
    std::vector<std::shared_ptr<AllReduceOp>> ops;
    for (size_t r = 0; r < c.members; ++r) {
      parts[r].assign(count / c.members + 1, -1.0f);
      AllReduceSpec spec;
      spec.input = inputs[r].data();
      spec.count = count;
      spec.codec = c.codec;
      spec.schedule = c.schedule;
      spec.segment_bytes = 1024;
      spec.scatter_output = parts[r].data();
      if (staged) {
        slots[r].assign(count, std::numeric_limits<float>::quiet_NaN());
        pipelines[r] = StagingPipeline::create(
            std::make_shared<LateCopies>(), {.source = inputs[r].data(),
                                             .source_count = count,
                                             .slot = reinterpret_cast<std::byte*>(slots[r].data()),
                                             .bytes = count * sizeof(float),
                                             .element_size = sizeof(float),
                                             .slot_owner = nullptr});
        spec.input = slots[r].data();
        spec.restore_input = false;
        spec.segment_staging = pipelines[r];
        spec.land_output = [p = pipelines[r]] { return p->land(); };
      }
      auto op = members.engines[r]->allreduce(group.view(r), spec);
      EXPECT_TRUE(op.is_ok()) << op.status().to_string();
      if (!op) return std::pair{parts, pipelines};
      ops.push_back(*op);
    }
    for (auto& op : ops) EXPECT_TRUE(op->wait().is_ok());
    return std::pair{parts, pipelines};
  };
  const auto want = run(false).first;
  const auto [got, pipelines] = run(true);
  for (size_t r = 0; r < c.members; ++r) {
    EXPECT_EQ(std::memcmp(got[r].data(), want[r].data(), got[r].size() * sizeof(float)), 0)
        << "member " << r;
    ASSERT_TRUE(pipelines[r]);
    EXPECT_EQ(pipelines[r]->counts().input_encoded > 0, c.codec != Codec::kNone) << "member " << r;
  }
}

TEST(StagingPipeline, AGroupOfOneLoadsAndLandsTheWholeBuffer) {
  const Case c{Schedule::kRing, 1, Codec::kNone};
  Staged m;
  m.caller = random_floats(777, 9);
  InProcessGroup group(1);
  Members members(1);
  AllReduceSpec spec = staged_spec(c, m, std::make_shared<LateCopies>(), /*out_of_place=*/true);
  spec.op = quant::ReduceOp::kAvg;
  auto op = members.engines[0]->allreduce(group.view(0), spec);
  ASSERT_TRUE(op.is_ok()) << op.status().to_string();
  ASSERT_TRUE((*op)->wait().is_ok());
  EXPECT_EQ(m.result, m.caller);
}

// Error feedback encodes value + residual, and the residual lives on the host: every segment
// arrives as values and is encoded there.
TEST(StagingPipeline, WithErrorFeedbackEverySegmentArrivesAsValues) {
  for (Schedule schedule : {Schedule::kRing, Schedule::kDirect}) {
    const Case c{schedule, 3, Codec::kU8};
    std::vector<Staged> staged(c.members);
    std::vector<std::vector<float>> residuals(c.members, std::vector<float>(4099, 0.25f));
    auto engine = std::make_shared<LateCopies>();
    InProcessGroup group(c.members);
    Members members(c.members);
    std::vector<std::shared_ptr<AllReduceOp>> ops;
    for (size_t r = 0; r < c.members; ++r) {
      staged[r].caller = random_floats(4099, r + 20);
      AllReduceSpec spec = staged_spec(c, staged[r], engine, false);
      spec.residual = residuals[r].data();
      auto op = members.engines[r]->allreduce(group.view(r), spec);
      ASSERT_TRUE(op.is_ok()) << op.status().to_string();
      ops.push_back(*op);
    }
    for (auto& op : ops) ASSERT_TRUE(op->wait().is_ok());
    EXPECT_EQ(engine->encoded(), 0u) << schedule_name(schedule);
    for (size_t r = 1; r < c.members; ++r)
      EXPECT_EQ(std::memcmp(staged[r].caller.data(), staged[0].caller.data(), 4099 * sizeof(float)),
                0)
          << schedule_name(schedule) << ": every member ends with the owners' final bytes";
    EXPECT_NE(residuals[0], std::vector<float>(4099, 0.25f)) << "the residual was carried";
  }
}

// bf16 is converted on the CPU (the GPU has kernels for the blockwise codecs only): with an
// engine that does not run it, every segment moves as values, and the bits are the host's.
TEST(StagingPipeline, ACodecTheEngineDoesNotRunTravelsAsValues) {
  const Case c{Schedule::kDirect, 3, Codec::kBf16};
  std::vector<std::vector<float>> data;
  for (size_t r = 0; r < c.members; ++r) data.push_back(random_floats(3001, r + 40));
  const auto expected = testing::allreduce_in_place(c, data);
  std::vector<Staged> staged(c.members);
  auto engine = std::make_shared<LateCopies>();
  InProcessGroup group(c.members);
  Members members(c.members);
  std::vector<std::shared_ptr<AllReduceOp>> ops;
  for (size_t r = 0; r < c.members; ++r) {
    staged[r].caller = data[r];
    auto op =
        members.engines[r]->allreduce(group.view(r), staged_spec(c, staged[r], engine, false));
    ASSERT_TRUE(op.is_ok()) << op.status().to_string();
    ops.push_back(*op);
  }
  for (auto& op : ops) ASSERT_TRUE(op->wait().is_ok());
  EXPECT_EQ(engine->encoded(), 0u);
  for (size_t r = 0; r < c.members; ++r) {
    EXPECT_EQ(staged[r].pipeline->counts().output_decoded, 0u);
    EXPECT_EQ(std::memcmp(staged[r].caller.data(), expected[r].data(), 3001 * sizeof(float)), 0)
        << "member " << r;
  }
}

TEST(StagingPipeline, AMemberDyingWhileCopiesArePendingFailsEveryoneAndKeepsTheCallersBuffer) {
  for (Schedule schedule : {Schedule::kRing, Schedule::kDirect}) {
    const Case c{schedule, 3, Codec::kNone};
    std::vector<Staged> staged(c.members);
    auto engine = std::make_shared<LateCopies>();
    InProcessGroup group(c.members);
    Members members(c.members);
    // Member 1 dies before it joins, so the others cannot finish before it is gone.
    const size_t survivors[] = {0, 2};
    std::vector<std::shared_ptr<AllReduceOp>> ops(c.members);
    for (size_t r : survivors) {
      staged[r].caller.assign(1 << 18, 2.0f);
      auto op =
          members.engines[r]->allreduce(group.view(r), staged_spec(c, staged[r], engine, false));
      ASSERT_TRUE(op.is_ok()) << op.status().to_string();
      ops[r] = *op;
    }
    group.kill(1);
    for (size_t r : survivors) {
      const Status s = ops[r]->wait();
      EXPECT_TRUE(s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED) << s.to_string();
      EXPECT_EQ(staged[r].caller, std::vector<float>(1 << 18, 2.0f))
          << schedule_name(schedule) << " member " << r;
    }
  }
}

// A failing encoding copy in (a member's first send-only segment), or decoding copy out (out of
// place: its first result segment), fails the operation with its error, on every schedule.
TEST(StagingPipeline, AFailingEncodingOrDecodingCopyFailsTheOperationWithItsError) {
  for (Schedule schedule : {Schedule::kRing, Schedule::kDirect})
    for (bool decoding : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << schedule_name(schedule) << (decoding ? ", decoding" : ", encoding"));
      const Case c{schedule, 3, Codec::kU8};
      std::vector<Staged> staged(c.members);
      InProcessGroup group(c.members);
      Members members(c.members);
      std::vector<std::shared_ptr<AllReduceOp>> ops;
      for (size_t r = 0; r < c.members; ++r) {
        staged[r].caller = random_floats(1 << 14, r + 80);
        const testing::FailingCopy fails{.first_encode = r == 0 && !decoding,
                                         .first_decode = r == 0 && decoding};
        auto op = members.engines[r]->allreduce(
            group.view(r), staged_spec(c, staged[r], std::make_shared<LateCopies>(fails),
                                       /*out_of_place=*/true));
        ASSERT_TRUE(op.is_ok()) << op.status().to_string();
        ops.push_back(*op);
      }
      const Status s = ops[0]->wait();
      EXPECT_EQ(s.code(), LH_ERR_INTERNAL) << s.to_string();
      EXPECT_NE(s.to_string().find("copy failed on purpose"), std::string::npos) << s.to_string();
      for (size_t r = 1; r < c.members; ++r) (void)ops[r]->wait();  // may finish: 0's part is sent
    }
}

TEST(StagingPipeline, ACopyFailingFailsTheOperationWithItsError) {
  const Case c{Schedule::kRing, 2, Codec::kNone};
  std::vector<Staged> staged(c.members);
  InProcessGroup group(c.members);
  Members members(c.members);
  std::vector<std::shared_ptr<AllReduceOp>> ops;
  for (size_t r = 0; r < c.members; ++r) {
    staged[r].caller.assign(1 << 16, 1.0f);
    // Member 0's fifth copy fails.
    auto engine = std::make_shared<LateCopies>(testing::FailingCopy{.nth = r == 0 ? 5u : 0u});
    auto op =
        members.engines[r]->allreduce(group.view(r), staged_spec(c, staged[r], engine, false));
    ASSERT_TRUE(op.is_ok()) << op.status().to_string();
    ops.push_back(*op);
  }
  const Status s = ops[0]->wait();
  EXPECT_EQ(s.code(), LH_ERR_INTERNAL) << s.to_string();
  EXPECT_NE(s.to_string().find("copy failed on purpose"), std::string::npos) << s.to_string();
  EXPECT_FALSE(ops[1]->wait().is_ok());
  for (size_t r = 0; r < c.members; ++r)
    EXPECT_EQ(staged[r].caller, std::vector<float>(1 << 16, 1.0f)) << "member " << r;
}

}  // namespace
}  // namespace longhaul::collective
