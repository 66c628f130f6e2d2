#include "test_values.hpp"

#include <cstring>
#include <random>

#include "collective/engine.hpp"
#include "group_fixture.hpp"
#include "quant/half.hpp"

namespace longhaul::collective::testing {

std::vector<float> random_floats(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-10.0f, 10.0f);
  std::vector<float> v(count);
  for (float& x : v) x = value(rng);
  return v;
}

std::vector<std::byte> random_values(quant::DType t, quant::ReduceOp op, size_t count,
                                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool prod = op == quant::ReduceOp::kProd;
  std::uniform_real_distribution<double> real(prod ? 0.5 : -100.0, prod ? 1.5 : 100.0);
  const size_t elem = quant::element_size(t);
  std::vector<std::byte> v(count * elem);
  for (size_t i = 0; i < count; ++i) {
    std::byte* p = v.data() + i * elem;
    const double x = real(rng);
    if (t == quant::DType::kF32) {
      const float f = static_cast<float>(x);
      std::memcpy(p, &f, 4);
    } else if (t == quant::DType::kF64) {
      std::memcpy(p, &x, 8);
    } else if (t == quant::DType::kF16 || t == quant::DType::kBF16) {
      const uint16_t h = t == quant::DType::kF16 ? quant::f32_to_f16(static_cast<float>(x))
                                                 : quant::f32_to_bf16(static_cast<float>(x));
      std::memcpy(p, &h, 2);
    } else {
      const uint64_t bits = rng();
      std::memcpy(p, &bits, elem);
    }
  }
  return v;
}

std::vector<size_t> uneven_counts(size_t members, size_t max, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> count(0, max);
  std::vector<size_t> counts;
  for (size_t r = 0; r < members; ++r) counts.push_back(r == 1 ? 0 : count(rng));
  return counts;
}

Partition chunks_of(const std::vector<size_t>& counts, size_t segment_elems) {
  std::vector<Range> chunks;
  size_t begin = 0;
  for (size_t c : counts) {
    chunks.push_back({begin, c});
    begin += c;
  }
  return Partition(std::move(chunks), segment_elems);
}

std::vector<float> codec_round_trip(const float* values, const Partition& part, size_t chunk,
                                    quant::Codec codec, size_t block) {
  const Range whole = part.chunk(chunk);
  std::vector<float> out(whole.count);
  for (size_t s = 0; s < part.segments(); ++s) {
    const Range seg = part.segment(chunk, s);
    if (seg.count == 0) continue;
    std::vector<std::byte> wire(*quant::encoded_size(seg.count, codec, block));
    const std::span<const float> in(values + (seg.begin - whole.begin), seg.count);
    if (!quant::encode(in, wire, codec, block)) return {};
    if (!quant::decode(wire, {out.data() + (seg.begin - whole.begin), seg.count}, codec, block))
      return {};
  }
  return out;
}

EndOnExit::~EndOnExit() {
  for (auto& op : ops) op->abort(aborted_error("the test ended"));
  for (auto& op : ops) (void)op->wait();
}

std::vector<ScheduleCase> schedule_cases() {
  std::vector<ScheduleCase> cases;
  for (Schedule s : {Schedule::kRing, Schedule::kDirect})
    for (size_t n : {2, 3, 4})
      for (quant::Codec codec : {quant::Codec::kNone, quant::Codec::kU8})
        cases.push_back({s, n, codec});
  return cases;
}

std::string schedule_case_name(const ::testing::TestParamInfo<ScheduleCase>& p) {
  return std::string(schedule_name(p.param.schedule)) + "_n" + std::to_string(p.param.members) +
         "_" + std::string(quant::codec_name(p.param.codec));
}

std::vector<std::vector<float>> allreduce_in_place(const ScheduleCase& c,
                                                   std::vector<std::vector<float>> data,
                                                   const transport::Staging* staging) {
  InProcessGroup group(c.members);
  Members members(c.members);
  std::vector<std::shared_ptr<AllReduceOp>> ops;
  for (size_t r = 0; r < c.members; ++r) {
    AllReduceSpec spec;
    spec.input = spec.output = data[r].data();
    spec.count = data[r].size();
    spec.schedule = c.schedule;
    spec.codec = c.codec;
    spec.segment_bytes = 1024;
    spec.staging = staging;
    auto op = members.engines[r]->allreduce(group.view(r), spec);
    EXPECT_TRUE(op.is_ok()) << op.status().to_string();
    if (op) ops.push_back(*op);
  }
  for (auto& op : ops) EXPECT_TRUE(op->wait().is_ok());
  return data;
}

}  // namespace longhaul::collective::testing
