// Reduce-scatter (an all-reduce's first phase, AllReduceSpec::scatter_output) against a scalar
// reference that combines in the schedule's order, at N = 2 to 5, ring and direct, every type and
// op, uneven and empty parts, plain and quantized.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "collective/engine.hpp"
#include "group_fixture.hpp"
#include "quant/reduce.hpp"
#include "test_values.hpp"

namespace longhaul::collective {
namespace {

using quant::Codec;
using quant::DType;
using quant::ReduceOp;
using testing::EndOnExit;
using testing::InProcessGroup;
using testing::Members;

constexpr DType kEveryType[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                                DType::kU8,  DType::kI32, DType::kU32, DType::kI64,  DType::kU64};
constexpr ReduceOp kEveryOp[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                                 ReduceOp::kProd};

struct Case {
  Schedule schedule;
  size_t members;
};

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return std::string(schedule_name(p.param.schedule)) + "_n" + std::to_string(p.param.members);
}

// f16/bf16 sums and averages combine in f32 and round once per combining step.
bool widens(DType t, ReduceOp op) {
  return (t == DType::kF16 || t == DType::kBF16) && (op == ReduceOp::kSum || op == ReduceOp::kAvg);
}

// The f32 sum of `parts` (each `count` values of t), averaged over n if asked, rounded to t once.
std::vector<std::byte> widened(const std::vector<const std::byte*>& parts, size_t count, DType t,
                               size_t average_over) {
  std::vector<float> f(count, -0.0f);
  for (const std::byte* p : parts) EXPECT_TRUE(quant::accumulate_f32(f.data(), p, count, t));
  if (average_over > 1) {
    EXPECT_TRUE(quant::finalize_avg(f.data(), count, DType::kF32, average_over));
  }
  std::vector<std::byte> bytes(count * quant::element_size(t));
  EXPECT_TRUE(quant::store_from_f32(bytes.data(), f.data(), count, t));
  return bytes;
}

// Member u's part, reduced the way the schedule combines it: the ring's partial sum starts at
// member u+1 and each next member combines `local op incoming`; the direct owner u combines its
// own values, then the others in ring order after it.
std::vector<std::byte> reference(const std::vector<std::vector<std::byte>>& inputs, DType t,
                                 ReduceOp op, Range part, size_t u, Schedule schedule) {
  const size_t n = inputs.size(), elem = quant::element_size(t);
  const size_t first = schedule == Schedule::kRing ? (u + 1) % n : u;
  auto slice = [&](size_t m) {
    const std::byte* p = inputs[m].data() + part.begin * elem;
    return std::vector<std::byte>(p, p + part.count * elem);
  };
  std::vector<std::byte> acc = slice(first);
  if (widens(t, op) && schedule == Schedule::kDirect) {
    std::vector<const std::byte*> all;
    std::vector<std::vector<std::byte>> keep;
    for (size_t i = 0; i < n; ++i) keep.push_back(slice((first + i) % n));
    for (const auto& k : keep) all.push_back(k.data());
    return widened(all, part.count, t, op == ReduceOp::kAvg ? n : 1);
  }
  for (size_t i = 1; i < n; ++i) {
    std::vector<std::byte> local = slice((first + i) % n);
    const bool last = i + 1 == n;
    if (widens(t, op)) {
      acc =
          widened({local.data(), acc.data()}, part.count, t, last && op == ReduceOp::kAvg ? n : 1);
      continue;
    }
    if (schedule == Schedule::kRing) {
      EXPECT_TRUE(quant::reduce_into(local.data(), acc.data(), part.count, t, op));
      acc = local;
    } else {
      EXPECT_TRUE(quant::reduce_into(acc.data(), local.data(), part.count, t, op));
    }
  }
  if (op == ReduceOp::kAvg && !widens(t, op) && part.count > 0) {
    EXPECT_TRUE(quant::finalize_avg(acc.data(), part.count, t, n));
  }
  return acc;
}

class ReduceScatter : public ::testing::TestWithParam<Case> {
 protected:
  size_t n() const { return GetParam().members; }

  // Runs a reduce-scatter of `inputs` on every member; every output starts as 0xCD bytes.
  std::vector<std::vector<std::byte>> run(const std::vector<std::vector<std::byte>>& inputs,
                                          const std::vector<size_t>& counts, AllReduceSpec base) {
    InProcessGroup group(n());
    Members members(n());
    const size_t elem = quant::element_size(base.dtype);
    std::vector<std::vector<std::byte>> out;
    for (size_t r = 0; r < n(); ++r) out.emplace_back(counts[r] * elem, std::byte{0xCD});
    EndOnExit started;
    for (size_t r = 0; r < n(); ++r) {
      AllReduceSpec s = base;
      s.input = inputs[r].data();
      s.output = nullptr;
      s.scatter_output = out[r].empty() ? static_cast<void*>(&unused_) : out[r].data();
      s.chunk_counts = counts;
      auto op = members.engines[r]->allreduce(group.view(r), s);
      EXPECT_TRUE(op.is_ok()) << op.status().to_string();
      if (!op) return {};
      started.ops.push_back(*op);
    }
    for (size_t r = 0; r < n(); ++r) EXPECT_TRUE(started.ops[r]->wait().is_ok()) << r;
    return out;
  }

 private:
  std::byte unused_{};
};

TEST_P(ReduceScatter, EveryTypeAndOpWithUnevenAndEmptyPartsMatchesTheReference) {
  for (DType t : kEveryType)
    for (ReduceOp op : kEveryOp) {
      if (!quant::check_supported(t, op)) continue;
      SCOPED_TRACE(std::string(quant::dtype_name(t)) + " " +
                   std::string(quant::reduce_op_name(op)));
      const auto counts = testing::uneven_counts(n(), 30, n() + static_cast<size_t>(t));
      size_t total = 0;
      for (size_t c : counts) total += c;
      std::vector<std::vector<std::byte>> inputs;
      for (size_t r = 0; r < n(); ++r)
        inputs.push_back(testing::random_values(t, op, total, 100 * r + 7));
      AllReduceSpec s;
      s.count = total;
      s.dtype = t;
      s.op = op;
      s.schedule = GetParam().schedule;
      s.segment_bytes = 16;
      const auto out = run(inputs, counts, s);
      ASSERT_EQ(out.size(), n());
      const Partition parts = testing::chunks_of(counts, 1);
      for (size_t u = 0; u < n(); ++u)
        EXPECT_TRUE(out[u] == reference(inputs, t, op, parts.chunk(u), u, GetParam().schedule))
            << "member " << u;
    }
}

TEST_P(ReduceScatter, EvenPartsByDefault) {
  const size_t total = 10 * n() + 3;  // parts differ by at most one element
  std::vector<std::vector<std::byte>> inputs;
  for (size_t r = 0; r < n(); ++r)
    inputs.push_back(testing::random_values(DType::kI32, ReduceOp::kSum, total, r));
  AllReduceSpec s;
  s.count = total;
  s.dtype = DType::kI32;
  s.schedule = GetParam().schedule;
  const Partition even(total, n(), 1);
  std::vector<size_t> counts;
  for (size_t u = 0; u < n(); ++u) counts.push_back(even.chunk(u).count);
  const auto out = run(inputs, counts, s);
  ASSERT_EQ(out.size(), n());
  for (size_t u = 0; u < n(); ++u)
    EXPECT_TRUE(out[u] == reference(inputs, DType::kI32, ReduceOp::kSum, even.chunk(u), u,
                                    GetParam().schedule));
}

// Quantized: the contributions (direct) or partial sums (ring) travel encoded, segment by
// segment; the part's owner keeps the f32 sum of what it decoded, not encoded again.
TEST_P(ReduceScatter, QuantizedMatchesTheEncodedPathReference) {
  const auto counts = testing::uneven_counts(n(), 500, 31 * n());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<std::vector<std::byte>> inputs;
  for (size_t r = 0; r < n(); ++r)
    inputs.push_back(testing::random_values(DType::kF32, ReduceOp::kSum, total, r + 40));
  AllReduceSpec s;
  s.count = total;
  s.codec = Codec::kU8;
  s.block = 32;
  s.schedule = GetParam().schedule;
  s.segment_bytes = 256;
  const auto out = run(inputs, counts, s);
  ASSERT_EQ(out.size(), n());
  const Partition parts = testing::chunks_of(counts, 64);
  const bool ring = GetParam().schedule == Schedule::kRing;
  for (size_t u = 0; u < n(); ++u) {
    std::vector<float> expected(counts[u]);
    for (size_t j = 0; j < parts.segments(); ++j) {
      const Range seg = parts.segment(u, j);
      if (seg.count == 0) continue;
      auto values = [&](size_t m) {
        return reinterpret_cast<const float*>(inputs[m].data()) + seg.begin;
      };
      auto encoded = [&](const float* v) {
        std::vector<std::byte> w(*quant::encoded_size(seg.count, Codec::kU8, 32));
        EXPECT_TRUE(quant::encode({v, seg.count}, w, Codec::kU8, 32));
        return w;
      };
      const size_t first = ring ? (u + 1) % n() : u;
      std::vector<float> acc(values(first), values(first) + seg.count);
      for (size_t i = 1; i < n(); ++i) {
        const size_t m = (first + i) % n();
        if (ring) {  // the partial sum travels encoded to m, who adds its own values
          const auto w = encoded(acc.data());
          acc.assign(values(m), values(m) + seg.count);
          EXPECT_TRUE(quant::decode_accumulate(w, acc, Codec::kU8, 32));
        } else {  // m's contribution travels encoded to the owner
          EXPECT_TRUE(quant::decode_accumulate(encoded(values(m)), acc, Codec::kU8, 32));
        }
      }
      std::copy(acc.begin(), acc.end(), expected.begin() + (seg.begin - parts.chunk(u).begin));
    }
    EXPECT_EQ(std::memcmp(out[u].data(), expected.data(), out[u].size()), 0) << "member " << u;
  }
}

std::vector<Case> every_case() {
  std::vector<Case> cases;
  for (Schedule s : {Schedule::kRing, Schedule::kDirect})
    for (size_t n : {2, 3, 4, 5}) cases.push_back({s, n});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schedules, ReduceScatter, ::testing::ValuesIn(every_case()), case_name);

TEST(ReduceScatterRequest, CountsThatDoNotFitTheGroupOrInputAreRefused) {
  InProcessGroup group(3);
  Members members(3);
  std::vector<float> in(9), out(3);
  AllReduceSpec s;
  s.input = in.data();
  s.count = 9;
  s.scatter_output = out.data();
  s.chunk_counts = {3, 3};
  EXPECT_EQ(members.engines[0]->allreduce(group.view(0), s).status().code(),
            LH_ERR_INVALID_ARGUMENT);
  s.chunk_counts = {3, 3, 4};
  EXPECT_EQ(members.engines[0]->allreduce(group.view(0), s).status().code(),
            LH_ERR_INVALID_ARGUMENT);
  s.chunk_counts = {3, 3, 3};
  s.scatter_output = in.data() + 6;
  EXPECT_EQ(members.engines[0]->allreduce(group.view(0), s).status().code(),
            LH_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace longhaul::collective
