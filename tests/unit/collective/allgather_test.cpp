// All-gather, broadcast and barrier (collective/gather.hpp) against a scalar reference, at N = 2
// to 5, ring and direct, every type, uneven and empty contributions, plain and quantized.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "collective/engine.hpp"
#include "collective/request.hpp"
#include "group_fixture.hpp"
#include "test_values.hpp"

namespace longhaul::collective {
namespace {

using quant::Codec;
using quant::DType;
using testing::EndOnExit;
using testing::InProcessGroup;
using testing::Members;

constexpr DType kEveryType[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                                DType::kU8,  DType::kI32, DType::kU32, DType::kI64,  DType::kU64};

struct Case {
  Schedule schedule;
  size_t members;
};

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return std::string(schedule_name(p.param.schedule)) + "_n" + std::to_string(p.param.members);
}

class Gathering : public ::testing::TestWithParam<Case> {
 protected:
  size_t n() const { return GetParam().members; }

  GatherSpec spec(DType t, const std::vector<size_t>& counts, Codec codec = Codec::kNone) const {
    GatherSpec s;
    s.dtype = t;
    s.counts = counts;
    s.codec = codec;
    s.schedule = GetParam().schedule;
    s.segment_bytes = 24;  // several segments per contribution, a short last one
    return s;
  }

  // Runs `base` on every member, member r contributing inputs[r] (from its place in the output
  // when `in_place`); every output starts as 0xAB bytes. Returns the outputs and infos.
  std::vector<std::vector<std::byte>> run(const std::vector<std::vector<std::byte>>& inputs,
                                          const GatherSpec& base, bool in_place = false,
                                          std::vector<OpInfo>* infos = nullptr) {
    InProcessGroup group(n());
    Members members(n());
    const size_t elem = quant::element_size(base.dtype);
    std::vector<std::vector<std::byte>> out(
        n(), std::vector<std::byte>(base.total() * elem, std::byte{0xAB}));
    EndOnExit started;
    size_t place = 0;
    for (size_t r = 0; r < n(); ++r) {
      GatherSpec s = base;
      s.output = out[r].data();
      s.input = inputs[r].data();
      if (in_place && !inputs[r].empty()) {
        std::memcpy(out[r].data() + place * elem, inputs[r].data(), inputs[r].size());
        s.input = out[r].data() + place * elem;
      }
      place += base.counts[r];
      auto op = members.engines[r]->gather(group.view(r), s);
      EXPECT_TRUE(op.is_ok()) << op.status().to_string();
      if (!op) return {};
      started.ops.push_back(*op);
    }
    for (size_t r = 0; r < n(); ++r) {
      EXPECT_TRUE(started.ops[r]->wait().is_ok()) << "member " << r;
      if (infos) infos->push_back(started.ops[r]->info());
    }
    return out;
  }
};

using AllGather = Gathering;
using Broadcast = Gathering;
using Barrier = Gathering;

std::vector<std::byte> concatenation(const std::vector<std::vector<std::byte>>& inputs) {
  std::vector<std::byte> all;
  for (const auto& in : inputs) all.insert(all.end(), in.begin(), in.end());
  return all;
}

TEST_P(AllGather, EveryTypeWithUnevenAndEmptyContributionsEndsAsTheConcatenationEverywhere) {
  for (DType t : kEveryType) {
    SCOPED_TRACE(quant::dtype_name(t));
    const auto counts = testing::uneven_counts(n(), 40, n() * 7 + static_cast<size_t>(t));
    std::vector<std::vector<std::byte>> inputs;
    for (size_t r = 0; r < n(); ++r)
      inputs.push_back(testing::random_values(t, quant::ReduceOp::kSum, counts[r], r + 1));
    for (bool in_place : {false, true}) {
      const auto out = run(inputs, spec(t, counts), in_place);
      ASSERT_EQ(out.size(), n());
      for (size_t r = 0; r < n(); ++r)
        EXPECT_TRUE(out[r] == concatenation(inputs)) << "member " << r << " in place " << in_place;
    }
  }
}

TEST_P(AllGather, QuantizedEncodesEachContributionOnceAndEveryMemberHoldsItsDecoding) {
  for (Codec codec : {Codec::kFp16, Codec::kBf16, Codec::kU8, Codec::kU4, Codec::kE3M0}) {
    SCOPED_TRACE(quant::codec_name(codec));
    const auto counts = testing::uneven_counts(n(), 300, 11 + n());
    std::vector<std::vector<std::byte>> inputs;
    for (size_t r = 0; r < n(); ++r)
      inputs.push_back(testing::random_values(DType::kF32, quant::ReduceOp::kSum, counts[r], r));
    GatherSpec s = spec(DType::kF32, counts, codec);
    s.segment_bytes = 400;
    s.block = 32;
    std::vector<OpInfo> infos;
    const auto out = run(inputs, s, false, &infos);
    ASSERT_EQ(out.size(), n());
    const Partition part = testing::chunks_of(counts, s.segment_bytes / 4);
    std::vector<float> expected;
    size_t encoded = 0;  // bytes of every member's encoding
    std::vector<size_t> own_encoded(n());
    for (size_t r = 0; r < n(); ++r) {
      const auto decoded = testing::codec_round_trip(
          reinterpret_cast<const float*>(inputs[r].data()), part, r, codec, s.block);
      expected.insert(expected.end(), decoded.begin(), decoded.end());
      for (size_t j = 0; j < part.segments(); ++j)
        if (size_t k = part.segment(r, j).count)
          own_encoded[r] += *quant::encoded_size(k, codec, 32);
      encoded += own_encoded[r];
    }
    for (size_t r = 0; r < n(); ++r) {
      EXPECT_EQ(std::memcmp(out[r].data(), expected.data(), out[r].size()), 0) << "member " << r;
      // Each member receives every other member's encoding once; nothing is re-encoded.
      EXPECT_EQ(infos[r].bytes_received, encoded - own_encoded[r]) << "member " << r;
    }
  }
}

TEST_P(Broadcast, EveryRootAndTypeEndsWithTheRootsBitsEverywhere) {
  for (DType t : kEveryType)
    for (size_t root = 0; root < n(); ++root) {
      SCOPED_TRACE(std::string(quant::dtype_name(t)) + " root " + std::to_string(root));
      std::vector<size_t> counts(n(), 0);
      counts[root] = 37;
      std::vector<std::vector<std::byte>> inputs(n());
      inputs[root] = testing::random_values(t, quant::ReduceOp::kSum, 37, root + 5);
      const auto out = run(inputs, spec(t, counts), /*in_place=*/true);
      ASSERT_EQ(out.size(), n());
      for (size_t r = 0; r < n(); ++r) EXPECT_TRUE(out[r] == inputs[root]) << "member " << r;
    }
}

TEST_P(Broadcast, QuantizedTheRootHoldsTheSameDecodedBitsAsEveryone) {
  const size_t root = n() - 1;
  std::vector<size_t> counts(n(), 0);
  counts[root] = 1000;
  std::vector<std::vector<std::byte>> inputs(n());
  inputs[root] = testing::random_values(DType::kF32, quant::ReduceOp::kSum, 1000, 3);
  GatherSpec s = spec(DType::kF32, counts, Codec::kU8);
  s.segment_bytes = 512;
  const auto out = run(inputs, s, /*in_place=*/true);
  ASSERT_EQ(out.size(), n());
  const auto expected =
      testing::codec_round_trip(reinterpret_cast<const float*>(inputs[root].data()),
                                testing::chunks_of(counts, 128), root, Codec::kU8, s.block);
  for (size_t r = 0; r < n(); ++r)
    EXPECT_EQ(std::memcmp(out[r].data(), expected.data(), 4000), 0) << "member " << r;
}

TEST_P(Barrier, NoMemberLeavesBeforeTheLastOneEnters) {
  InProcessGroup group(n());
  Members members(n());
  GatherSpec s = spec(DType::kU8, std::vector<size_t>(n(), 0));
  EndOnExit started;
  for (size_t r = 0; r + 1 < n(); ++r) {
    auto op = members.engines[r]->gather(group.view(r), s);
    ASSERT_TRUE(op.is_ok()) << op.status().to_string();
    started.ops.push_back(*op);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (const auto& op : started.ops) EXPECT_FALSE(op->test()) << "left before the last entered";
  auto last = members.engines[n() - 1]->gather(group.view(n() - 1), s);
  ASSERT_TRUE(last.is_ok()) << last.status().to_string();
  started.ops.push_back(*last);
  for (const auto& op : started.ops) EXPECT_TRUE(op->wait().is_ok());
  EXPECT_EQ(started.ops[0]->info().bytes_sent, 0u);  // empty messages only
}

std::vector<Case> every_case() {
  std::vector<Case> cases;
  for (Schedule s : {Schedule::kRing, Schedule::kDirect})
    for (size_t n : {2, 3, 4, 5}) cases.push_back({s, n});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schedules, AllGather, ::testing::ValuesIn(every_case()), case_name);
INSTANTIATE_TEST_SUITE_P(Schedules, Broadcast, ::testing::ValuesIn(every_case()), case_name);
INSTANTIATE_TEST_SUITE_P(Schedules, Barrier, ::testing::ValuesIn(every_case()), case_name);

TEST(Gather, AloneTheOutputIsTheContribution) {
  InProcessGroup group(1);
  Members members(1);
  std::vector<float> in{1.5f, -2.0f, 3.25f}, out(3, 0.0f);
  GatherSpec s;
  s.input = in.data();
  s.output = out.data();
  s.counts = {3};
  auto op = members.engines[0]->gather(group.view(0), s);
  ASSERT_TRUE(op.is_ok());
  EXPECT_TRUE((*op)->wait().is_ok());
  EXPECT_EQ(out, in);
}

TEST(Gather, BadRequestsAreRefusedBeforeAnythingIsSent) {
  InProcessGroup group(3);
  Members members(3);
  std::vector<float> in(4), out(12);
  GatherSpec s;
  s.input = in.data();
  s.output = out.data();
  s.counts = {4, 4};  // a group of 3
  EXPECT_EQ(members.engines[0]->gather(group.view(0), s).status().code(), LH_ERR_INVALID_ARGUMENT);
  s.counts = {4, 4, 4};
  s.input = out.data() + 2;  // inside the output, but not at member 0's place
  EXPECT_EQ(members.engines[0]->gather(group.view(0), s).status().code(), LH_ERR_INVALID_ARGUMENT);
  s.input = in.data();
  s.dtype = DType::kF64;
  s.codec = Codec::kU8;
  EXPECT_EQ(members.engines[0]->gather(group.view(0), s).status().code(), LH_ERR_UNSUPPORTED);
}

TEST(Gather, AutoIsDirectForAlikeOrSmallContributionsAndRingForALargeBroadcast) {
  InProcessGroup group(4);
  GatherSpec s;
  s.counts = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
  EXPECT_EQ(choose_schedule(s, group.view(0)), Schedule::kDirect);
  s.counts = {1 << 20, 0, 0, 0};
  EXPECT_EQ(choose_schedule(s, group.view(0)), Schedule::kRing);
  s.counts = {4, 0, 0, 0};
  EXPECT_EQ(choose_schedule(s, group.view(0)), Schedule::kDirect);
  RingView partial = group.view(0);
  partial.full_mesh = false;
  EXPECT_EQ(choose_schedule(s, partial), Schedule::kRing);
}

}  // namespace
}  // namespace longhaul::collective
