// Faults at every step of the other collectives (all-gather, broadcast, barrier, reduce-scatter),
// ring and direct, N = 2 to 4, plain and u8, without a socket: the in-process links hold back every
// send of the chosen step and later ones, so every member stands exactly there; then one member
// loses a peer, is aborted, or sees its transfers cancelled. Every member must fail, every
// caller's input and output must be as before the call, nothing may stay held on a link, and the
// next operation (re-formed, next epoch, or same epoch) must be exact on every member.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "collective/engine.hpp"
#include "group_fixture.hpp"
#include "test_values.hpp"

namespace longhaul::collective {
namespace {

using quant::Codec;
using testing::EndOnExit;
using testing::InProcessGroup;
using testing::Members;

enum class Kind { kAllGather, kBroadcast, kBarrier, kReduceScatter };
enum class Fault { kLostPeer, kAbort, kCancel };

const char* kind_name(Kind k) {
  constexpr const char* names[] = {"allgather", "broadcast", "barrier", "reduce_scatter"};
  return names[static_cast<int>(k)];
}

struct Case {
  Kind kind;
  Schedule schedule;
  size_t members;
  Codec codec;
};

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return std::string(kind_name(p.param.kind)) + "_" + schedule_name(p.param.schedule) + "_n" +
         std::to_string(p.param.members) + "_" + std::string(quant::codec_name(p.param.codec));
}

// One member's buffers: small integers (exact in f32 sums).
struct Buffers {
  std::vector<float> input, output;
};

constexpr size_t kPart = 100;          // elements per member
constexpr size_t kSegmentBytes = 128;  // several segments per part, a short last one

std::vector<Buffers> make_buffers(const Case& c, uint64_t seed) {
  std::vector<Buffers> out(c.members);
  for (size_t r = 0; r < c.members; ++r) {
    for (size_t i = 0; i < kPart * c.members; ++i)
      out[r].input.push_back(
          static_cast<float>(static_cast<int>((seed + r * 31 + i * 7) % 101) - 50));
    out[r].output.assign(c.kind == Kind::kReduceScatter ? kPart : kPart * c.members, -7.0f);
    if (c.kind == Kind::kAllGather) out[r].input.resize(kPart);
    if (c.kind == Kind::kBroadcast) out[r].output = out[r].input;  // in place: the buffer
  }
  return out;
}

Result<std::shared_ptr<Operation>> start(const Case& c, CollectiveEngine& engine,
                                         const RingView& view, Buffers& b) {
  if (c.kind == Kind::kReduceScatter) {
    AllReduceSpec s;
    s.input = b.input.data();
    s.count = b.input.size();
    s.scatter_output = b.output.data();
    s.codec = c.codec;
    s.schedule = c.schedule;
    s.segment_bytes = kSegmentBytes;
    auto op = engine.allreduce(view, s);
    if (!op) return op.status();
    return std::shared_ptr<Operation>(*op);
  }
  GatherSpec s;
  s.dtype = c.kind == Kind::kBarrier ? quant::DType::kU8 : quant::DType::kF32;
  s.codec = c.kind == Kind::kBarrier ? Codec::kNone : c.codec;
  s.schedule = c.schedule;
  s.segment_bytes = kSegmentBytes;
  s.counts.assign(view.size, c.kind == Kind::kAllGather ? kPart : 0);
  if (c.kind == Kind::kBroadcast) s.counts[0] = kPart * view.size;  // root: ring position 0
  s.input = c.kind == Kind::kBroadcast ? b.output.data() : b.input.data();
  s.output = b.output.data();
  auto op = engine.gather(view, s);
  if (!op) return op.status();
  return std::shared_ptr<Operation>(*op);
}

// Every member holds a send back (broadcast: some member; only the root's chain sends).
bool stands_at_step(const InProcessGroup& group, bool every_member) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    size_t holding = 0;
    for (size_t r = 0; r < group.size(); ++r) {
      size_t held = 0;
      for (size_t p = 0; p < group.size(); ++p)
        if (p != r) held += group.link(r, p).held_sends();
      holding += held > 0 ? 1 : 0;
    }
    if (every_member ? holding == group.size() : holding > 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class GatherFailureWalk : public ::testing::TestWithParam<Case> {
 protected:
  void run_fault_at(size_t step, Fault fault);
  void expect_exact_next_operation(const std::vector<RingView>& views,
                                   const std::vector<size_t>& ranks, Members& members);
};

void GatherFailureWalk::run_fault_at(size_t step, Fault fault) {
  const Case c = GetParam();
  const size_t n = c.members, victim = step % n;
  InProcessGroup group(n, /*epoch=*/1);
  auto buffers = make_buffers(c, step + 3 * n);
  const auto original = buffers;
  Members members(n);  // after the buffers: its engines end their operations first
  group.for_each_end([step](transport::InProcessLink& end) {
    end.hold_sends([step](transport::Tag bits) { return Tag::unpack(bits).step >= step; });
  });
  EndOnExit started;
  for (size_t r = 0; r < n; ++r) {
    auto op = start(c, *members.engines[r], group.view(r), buffers[r]);
    ASSERT_TRUE(op.is_ok()) << op.status().to_string();
    started.ops.push_back(*op);
  }
  ASSERT_TRUE(stands_at_step(group, c.kind != Kind::kBroadcast)) << "never reached the step";
  switch (fault) {
    case Fault::kLostPeer:
      group.kill(victim);
      break;
    case Fault::kAbort:
      members.engines[victim]->abort_epoch(1, aborted_error("the master aborted epoch 1"));
      break;
    case Fault::kCancel:
      group.link(victim, (victim + 1) % n)
          .cancel_matching(Tag{1, 0}.operation_bits(), Tag::kOperationMask,
                           aborted_error("the test cancels the operation"));
      break;
  }
  for (size_t r = 0; r < n; ++r) {
    const Status s = started.ops[r]->wait();
    // A member with nothing left to do before the step completes (on a broadcast's ring, the
    // root and every member before the step), possibly before the fault reaches it: then its
    // output is complete. Every other member fails with every buffer as it was.
    if (s.is_ok()) {
      EXPECT_TRUE(c.kind == Kind::kBroadcast && r < step) << "member " << r << " succeeded";
      if (c.codec == Codec::kNone) {
        EXPECT_TRUE(buffers[r].output == original[0].output) << "member " << r << ": incomplete";
      }
      continue;
    }
    EXPECT_TRUE(s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED)
        << "member " << r << ": " << s.to_string();
    EXPECT_TRUE(buffers[r].input == original[r].input) << "member " << r << ": input changed";
    EXPECT_TRUE(buffers[r].output == original[r].output) << "member " << r << ": output changed";
  }
  group.for_each_end([](transport::InProcessLink& end) {
    EXPECT_EQ(end.held_sends(), 0u) << "a failed operation left a send on a link";
    end.hold_sends({});
  });
  std::vector<RingView> views;
  std::vector<size_t> ranks;
  if (fault == Fault::kLostPeer) {  // the survivors re-form without the victim
    InProcessGroup reformed(n - 1, /*epoch=*/2);
    for (size_t r = 0, i = 0; r < n; ++r)
      if (r != victim) {
        views.push_back(reformed.view(i++));
        ranks.push_back(r);
      }
    return expect_exact_next_operation(views, ranks, members);
  }
  for (size_t r = 0; r < n; ++r) {  // the next epoch (abort) or the same (cancel), same links
    views.push_back(group.view(r));
    if (fault == Fault::kAbort) views.back().epoch = 2;
    ranks.push_back(r);
  }
  expect_exact_next_operation(views, ranks, members);
}

void GatherFailureWalk::expect_exact_next_operation(const std::vector<RingView>& views,
                                                    const std::vector<size_t>& ranks,
                                                    Members& members) {
  Case c = GetParam();
  c.members = views.size();
  c.codec = Codec::kNone;
  auto buffers = make_buffers(c, 99);
  const auto original = buffers;
  EndOnExit started;
  for (size_t i = 0; i < views.size(); ++i) {
    auto op = start(c, *members.engines[ranks[i]], views[i], buffers[i]);
    ASSERT_TRUE(op.is_ok()) << op.status().to_string();
    started.ops.push_back(*op);
  }
  for (auto& op : started.ops) ASSERT_TRUE(op->wait().is_ok());
  for (size_t i = 0; i < views.size(); ++i) {
    std::vector<float> expected = original[i].output;  // the barrier's: untouched
    if (c.kind == Kind::kAllGather)
      for (size_t r = 0; r < views.size(); ++r)
        std::copy(original[r].input.begin(), original[r].input.end(),
                  expected.begin() + static_cast<std::ptrdiff_t>(r * kPart));
    if (c.kind == Kind::kBroadcast) expected = original[0].output;
    if (c.kind == Kind::kReduceScatter) {
      expected.assign(kPart, 0.0f);
      for (const auto& b : original)
        for (size_t k = 0; k < kPart; ++k) expected[k] += b.input[i * kPart + k];
    }
    EXPECT_EQ(buffers[i].output, expected) << "member " << ranks[i];
  }
}

TEST_P(GatherFailureWalk, AFaultAtAnyStepFailsEveryMemberAndLeavesEveryBufferAsItWas) {
  const Case c = GetParam();
  const size_t steps = c.schedule == Schedule::kRing ? c.members - 1 : 1;
  for (size_t step = 0; step < steps; ++step)
    for (Fault fault : {Fault::kLostPeer, Fault::kAbort, Fault::kCancel}) {
      SCOPED_TRACE("fault " + std::to_string(static_cast<int>(fault)) + " at step " +
                   std::to_string(step));
      ASSERT_NO_FATAL_FAILURE(run_fault_at(step, fault));
    }
}

std::vector<Case> every_case() {
  std::vector<Case> cases;
  for (Kind k : {Kind::kAllGather, Kind::kBroadcast, Kind::kBarrier, Kind::kReduceScatter})
    for (Schedule s : {Schedule::kRing, Schedule::kDirect})
      for (size_t n : {2, 3, 4})
        for (Codec codec : {Codec::kNone, Codec::kU8}) {
          if (k == Kind::kBarrier && codec != Codec::kNone) continue;
          cases.push_back({k, s, n, codec});
        }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Collectives, GatherFailureWalk, ::testing::ValuesIn(every_case()),
                         case_name);

}  // namespace
}  // namespace longhaul::collective
