// Inputs and scalar references for the collective tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collective/operation.hpp"
#include "collective/partition.hpp"
#include "quant/codec.hpp"
#include "quant/dtype.hpp"
#include "transport/source_sink.hpp"

namespace longhaul::collective::testing {

// `count` random values of type `t`, fit for `op` (products: factors near 1).
std::vector<std::byte> random_values(quant::DType t, quant::ReduceOp op, size_t count,
                                     uint64_t seed);

// `count` f32 values in [-10, 10), from `seed`.
std::vector<float> random_floats(size_t count, uint64_t seed);

// Per member, a count in [0, max] (some members 0), from `seed`.
std::vector<size_t> uneven_counts(size_t members, size_t max, uint64_t seed);

// The chunks of `counts` laid end to end, with segments of about `segment_elems`.
Partition chunks_of(const std::vector<size_t>& counts, size_t segment_elems);

// f32 values round-tripped through `codec` segment by segment, as a gathering operation moves
// them: decode(encode(segment)) for each segment of `part`'s chunk `chunk`.
std::vector<float> codec_round_trip(const float* values, const Partition& part, size_t chunk,
                                    quant::Codec codec, size_t block);

// A schedule, a group size and a codec: what the schedule-wide tests run over.
struct ScheduleCase {
  Schedule schedule;
  size_t members;
  quant::Codec codec;
};
// Ring and direct, N = 2, 3 and 4, plain and u8.
std::vector<ScheduleCase> schedule_cases();
// "ring_n3_u8" and so on.
std::string schedule_case_name(const ::testing::TestParamInfo<ScheduleCase>& p);
// An in-place f32 sum of every member's `data` in a fresh in-process group of c.members, with
// 1 KiB segments and `staging` (null: host memory); the members' results.
std::vector<std::vector<float>> allreduce_in_place(const ScheduleCase& c,
                                                   std::vector<std::vector<float>> data,
                                                   const transport::Staging* staging = nullptr);

// Ends the operations still running when a test leaves (also through a failed ASSERT), before the
// buffers they write into go. Declare it after the buffers.
struct EndOnExit {
  std::vector<std::shared_ptr<Operation>> ops;
  ~EndOnExit();
};

}  // namespace longhaul::collective::testing
