// Calls that disagree (signature.hpp), on in-process links: members that call one collective with
// a different reduce op, dtype, count or kind all fail it with LH_ERR_MISMATCH naming the field and
// the members, promptly (never a hang), with their outputs as they were; a member that calls it
// after the others failed fails at once with the same reason; and the next agreeing call works.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "collective/engine.hpp"
#include "collective/signature.hpp"
#include "group_fixture.hpp"

namespace longhaul::collective {
namespace {

using namespace std::chrono_literals;
using testing::InProcessGroup;
using testing::Members;

AllReduceSpec allreduce_of(const std::vector<float>& in, std::vector<float>& out,
                           quant::ReduceOp op = quant::ReduceOp::kSum) {
  AllReduceSpec spec;
  spec.input = in.data();
  spec.output = out.data();
  spec.count = in.size();
  spec.op = op;
  return spec;
}

// Starts `specs[r]` on member r (all at once) and returns each member's outcome.
std::vector<Status> run(InProcessGroup& group, Members& members,
                        const std::vector<AllReduceSpec>& specs) {
  std::vector<std::shared_ptr<AllReduceOp>> ops;
  std::vector<Status> outcomes(specs.size());
  for (size_t r = 0; r < specs.size(); ++r) {
    auto op = members.engines[r]->allreduce(group.view(r), specs[r]);
    if (!op) {
      outcomes[r] = op.status();
      ops.push_back(nullptr);
      continue;
    }
    ops.push_back(*op);
  }
  for (size_t r = 0; r < ops.size(); ++r) {
    if (!ops[r]) continue;
    EXPECT_TRUE(ops[r]->wait_until(std::chrono::steady_clock::now() + 30s))
        << "member " << r << " hangs";
    outcomes[r] = ops[r]->status();
  }
  return outcomes;
}

TEST(Signature, EncodesEveryFieldAndNamesTheFirstThatDiffers) {
  Signature a;
  a.call = Call::kBroadcast;
  a.dtype = static_cast<uint8_t>(quant::DType::kF64);
  a.op = static_cast<uint8_t>(quant::ReduceOp::kMax);
  a.codec = static_cast<uint8_t>(quant::Codec::kU8);
  a.schedule = Schedule::kDirect;
  a.block = 128;
  a.root = 3;
  a.count = 1ull << 40;
  a.layout = 0x0123456789abcdefull;
  const Signature b = Signature::decode(a.encode());
  EXPECT_EQ(a.encode(), b.encode());
  EXPECT_FALSE(describe_difference(a, b, "peer 1", "peer 2"));
  Signature c = b;
  c.op = static_cast<uint8_t>(quant::ReduceOp::kSum);
  EXPECT_EQ(describe_difference(a, c, "peer 1", "peer 2"),
            "the reduce op: max at peer 1, sum at peer 2");
  c = b;
  c.count = 5;
  EXPECT_EQ(describe_difference(a, c, "peer 1", "peer 2"),
            "the count: 1099511627776 elements at peer 1, 5 elements at peer 2");
  c = b;
  c.dtype = 200;  // outside the enumeration: shown as its number
  EXPECT_EQ(describe_difference(a, c, "peer 1", "peer 2"),
            "the dtype: f64 at peer 1, 200 at peer 2");
}

// No member's output receives another member's data: an out-of-place output is untouched, or holds
// the member's own input, which the operation copies there to work in (collectives.md, "Failure").
TEST(Signature, DifferentReduceOpsFailEveryMemberWithTheFieldAndNoOtherMembersData) {
  InProcessGroup group(3);
  Members members(3);
  std::vector<std::vector<float>> in;
  for (float v : {1.0f, 2.0f, 3.0f}) in.emplace_back(1000, v);
  std::vector<std::vector<float>> out(3, std::vector<float>(1000, -7.0f));
  const auto t0 = std::chrono::steady_clock::now();
  const auto outcomes = run(group, members,
                            {allreduce_of(in[0], out[0]), allreduce_of(in[1], out[1]),
                             allreduce_of(in[2], out[2], quant::ReduceOp::kMax)});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(outcomes[r].code(), LH_ERR_MISMATCH) << r << ": " << outcomes[r].to_string();
    EXPECT_NE(outcomes[r].message().find("the reduce op"), std::string::npos)
        << outcomes[r].to_string();
    EXPECT_NE(outcomes[r].message().find("ring position 2"), std::string::npos)
        << "names the member that called max: " << outcomes[r].to_string();
    for (float v : out[r])
      ASSERT_TRUE(v == -7.0f || v == in[r][0]) << "member " << r << "'s output holds " << v;
    EXPECT_EQ(in[r], std::vector<float>(1000, float(r + 1))) << "member " << r << "'s input";
  }
}

TEST(Signature, DifferentCountsFailBothMembersInsteadOfHangingOne) {
  InProcessGroup group(2);
  Members members(2);
  std::vector<float> small(1 << 16, 1.0f), large(1 << 17, 1.0f);
  std::vector<float> small_out(small.size()), large_out(large.size());
  const auto outcomes =
      run(group, members, {allreduce_of(small, small_out), allreduce_of(large, large_out)});
  for (const Status& s : outcomes) {
    EXPECT_EQ(s.code(), LH_ERR_MISMATCH) << s.to_string();
    EXPECT_NE(s.message().find("the count: "), std::string::npos) << s.to_string();
  }
}

TEST(Signature, DifferentDtypesAndDifferentCallsAreCaught) {
  InProcessGroup group(2);
  Members members(2);
  std::vector<float> f(64, 1.0f), f_out(64);
  std::vector<double> d(64, 1.0), d_out(64);
  AllReduceSpec as_double;
  as_double.input = d.data();
  as_double.output = d_out.data();
  as_double.count = d.size();
  as_double.dtype = quant::DType::kF64;
  auto outcomes = run(group, members, {allreduce_of(f, f_out), as_double});
  for (const Status& s : outcomes) {
    EXPECT_EQ(s.code(), LH_ERR_MISMATCH) << s.to_string();
    // Either member may tell first; both words name both members.
    for (const char* words : {"the dtype: ", "f32 at ring position 0", "f64 at ring position 1"})
      EXPECT_NE(s.message().find(words), std::string::npos) << s.to_string();
  }
  // An all-reduce on one member, an all-gather of as many elements on the other.
  std::vector<float> gathered(64, -1.0f);
  GatherSpec gather;
  gather.input = f.data();
  gather.output = gathered.data();
  gather.counts = {32, 32};
  auto reduce = members.engines[0]->allreduce(group.view(0), allreduce_of(f, f_out));
  auto all = members.engines[1]->gather(group.view(1), gather);
  ASSERT_TRUE(reduce.is_ok() && all.is_ok());
  const Status r = (*reduce)->wait(), g = (*all)->wait();
  EXPECT_EQ(r.code(), LH_ERR_MISMATCH) << r.to_string();
  EXPECT_EQ(g.code(), LH_ERR_MISMATCH) << g.to_string();
  for (const char* words :
       {"the call: ", "allreduce at ring position 0", "allgather at ring position 1"})
    EXPECT_NE(r.message().find(words), std::string::npos) << r.to_string();
  EXPECT_EQ(gathered, std::vector<float>(64, -1.0f));
}

TEST(Signature, AMemberThatCallsAfterTheOthersFailedFailsAtOnceWithTheirReason) {
  InProcessGroup group(3);
  Members members(3);
  std::vector<float> a(256, 1.0f), b(256, 1.0f), c(256, 1.0f), oa(256), ob(256), oc(256);
  auto first = members.engines[0]->allreduce(group.view(0), allreduce_of(a, oa));
  auto second =
      members.engines[1]->allreduce(group.view(1), allreduce_of(b, ob, quant::ReduceOp::kMin));
  ASSERT_TRUE(first.is_ok() && second.is_ok());
  EXPECT_EQ((*first)->wait().code(), LH_ERR_MISMATCH);
  EXPECT_EQ((*second)->wait().code(), LH_ERR_MISMATCH);
  const auto t0 = std::chrono::steady_clock::now();
  auto late = members.engines[2]->allreduce(group.view(2), allreduce_of(c, oc));
  ASSERT_TRUE(late.is_ok());
  const Status s = (*late)->wait();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(s.code(), LH_ERR_MISMATCH) << s.to_string();
  // The words of one of the two that disagree: each detects on its own, and the late member gets
  // whichever cancel reached it (collectives.md, "Calls that disagree").
  EXPECT_TRUE(s.message() == (*first)->status().message() ||
              s.message() == (*second)->status().message())
      << s.message();
  // The next call on which everyone agrees succeeds.
  std::vector<std::vector<float>> in(3, std::vector<float>(256, 1.0f)),
      out(3, std::vector<float>(256));
  const auto next =
      run(group, members,
          {allreduce_of(in[0], out[0]), allreduce_of(in[1], out[1]), allreduce_of(in[2], out[2])});
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_TRUE(next[r].is_ok()) << next[r].to_string();
    EXPECT_EQ(out[r], std::vector<float>(256, 3.0f));
  }
}

}  // namespace
}  // namespace longhaul::collective
