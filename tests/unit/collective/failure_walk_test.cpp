// Faults at every step of every schedule, without a socket: before a chosen step, every member's
// sends are held back by the in-process links, so the operation stands exactly at that step on
// every member; then one member loses a peer, is aborted, or sees its transfers cancelled. The
// operation must fail on every member (none half-applies it), every caller's input and residual
// must be back, nothing may stay held on a link, and the next operation must be bit-identical on
// every member.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "collective/engine.hpp"
#include "group_fixture.hpp"

namespace longhaul::collective {
namespace {

using quant::Codec;
using testing::InProcessGroup;
using testing::Members;

enum class Fault { kLostPeer, kAbort, kCancel };

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kLostPeer:
      return "lost peer";
    case Fault::kAbort:
      return "abort";
    case Fault::kCancel:
      return "cancel";
  }
  return "?";
}

// Reduce-scatter steps come first, then all-gather steps: N-1 of each on the ring, one of each
// direct.
size_t steps_per_phase(Schedule s, size_t n) {
  return s == Schedule::kRing ? n - 1 : 1;
}

size_t schedule_step(transport::Tag bits, Schedule s, size_t n) {
  const Tag t = Tag::unpack(bits);
  return (t.phase == Phase::kAllGather ? steps_per_phase(s, n) : 0) + t.step;
}

struct Case {
  Schedule schedule;
  size_t members;
  Codec codec;
};

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return std::string(schedule_name(p.param.schedule)) + "_n" + std::to_string(p.param.members) +
         "_" + std::string(quant::codec_name(p.param.codec));
}

// One member's buffers: an in-place input of small integers (exact in f32 sums) and, with a
// codec, an error-feedback residual.
struct Buffers {
  std::vector<float> data, residual;
};

std::vector<Buffers> make_buffers(size_t n, size_t count, bool residual, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> value(-50, 50);
  std::vector<Buffers> out(n);
  for (auto& b : out) {
    for (size_t i = 0; i < count; ++i) b.data.push_back(static_cast<float>(value(rng)));
    if (residual) b.residual.assign(count, 0.25f);
  }
  return out;
}

class FailureWalk : public ::testing::TestWithParam<Case> {
 protected:
  // 3 segments per chunk, one of them short: the pipeline has several segments at every step.
  static constexpr size_t kSegmentBytes = 256;
  size_t count() const { return GetParam().members * 3 * (kSegmentBytes / 4) - 5; }

  AllReduceSpec spec_for(Buffers& b) const {
    AllReduceSpec spec;
    spec.input = spec.output = b.data.data();
    spec.count = b.data.size();
    spec.codec = GetParam().codec;
    spec.schedule = GetParam().schedule;
    spec.segment_bytes = kSegmentBytes;
    if (!b.residual.empty()) spec.residual = b.residual.data();
    return spec;
  }

  void run_fault_at(size_t step, Fault fault);
  // Runs one operation on `views` (with the engines of `ranks`) and expects every member to end
  // with the same bits, and with the exact sum when no codec is used.
  void expect_exact_next_operation(const std::vector<RingView>& views,
                                   const std::vector<size_t>& ranks, Members& members);
};

// Ends the operations still running when a test leaves early (a failed ASSERT), before the
// buffers they write into go. Declare it after the buffers.
struct EndOnExit {
  std::vector<std::shared_ptr<AllReduceOp>> ops;
  ~EndOnExit() {
    for (auto& op : ops) op->abort(aborted_error("the test ended"));
    for (auto& op : ops) (void)op->wait();
  }
};

// Waits until every member has a send held back: every operation stands at the step.
bool all_members_held(const InProcessGroup& group) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    size_t held_members = 0;
    for (size_t r = 0; r < group.size(); ++r) {
      size_t held = 0;
      for (size_t p = 0; p < group.size(); ++p)
        if (p != r) held += group.link(r, p).held_sends();
      if (held > 0) ++held_members;
    }
    if (held_members == group.size()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void FailureWalk::run_fault_at(size_t step, Fault fault) {
  const auto [schedule, n, codec] = GetParam();
  const size_t victim = step % n;
  InProcessGroup group(n, /*epoch=*/1);
  auto buffers = make_buffers(n, count(), codec != Codec::kNone, step * 3 + n);
  const auto original = buffers;
  Members members(n);  // after the buffers: its engines end their operations first
  group.for_each_end([&, schedule = schedule, n = n](transport::InProcessLink& end) {
    end.hold_sends([=](transport::Tag bits) { return schedule_step(bits, schedule, n) >= step; });
  });
  EndOnExit started;
  auto& ops = started.ops;
  for (size_t r = 0; r < n; ++r) {
    auto op = members.engines[r]->allreduce(group.view(r), spec_for(buffers[r]));
    ASSERT_TRUE(op.is_ok()) << op.status().to_string();
    ops.push_back(*op);
  }
  ASSERT_TRUE(all_members_held(group)) << "the operations never reached the step";

  switch (fault) {
    case Fault::kLostPeer:
      group.kill(victim);
      break;
    case Fault::kAbort:  // the master's abort push, reaching this member first
      members.engines[victim]->abort_epoch(1, aborted_error("the master aborted epoch 1"));
      break;
    case Fault::kCancel:  // the victim's transfers of the operation, on one of its links
      group.link(victim, (victim + 1) % n)
          .cancel_matching(Tag{1, 0}.operation_bits(), Tag::kOperationMask,
                           aborted_error("the test cancels the operation"));
      break;
  }
  for (size_t r = 0; r < n; ++r) {
    const Status s = ops[r]->wait();
    EXPECT_TRUE(s.code() == LH_ERR_PEER_LOST || s.code() == LH_ERR_ABORTED)
        << "member " << r << ": " << s.to_string();
    EXPECT_TRUE(buffers[r].data == original[r].data) << "member " << r << ": input not restored";
    EXPECT_TRUE(buffers[r].residual == original[r].residual)
        << "member " << r << ": residual not restored";
  }
  group.for_each_end([](transport::InProcessLink& end) {
    EXPECT_EQ(end.held_sends(), 0u) << "a failed operation left a send on a link";
    end.hold_sends({});
  });

  if (fault == Fault::kLostPeer) {  // the survivors re-form without the victim
    std::vector<size_t> survivors;
    for (size_t r = 0; r < n; ++r)
      if (r != victim) survivors.push_back(r);
    InProcessGroup reformed(survivors.size(), /*epoch=*/2);
    std::vector<RingView> views;
    for (size_t i = 0; i < survivors.size(); ++i) views.push_back(reformed.view(i));
    expect_exact_next_operation(views, survivors, members);
    return;
  }
  // Aborted: the next epoch on the same links. Cancelled: the next operation of the same epoch.
  std::vector<RingView> views;
  std::vector<size_t> everyone;
  for (size_t r = 0; r < n; ++r) {
    views.push_back(group.view(r));
    if (fault == Fault::kAbort) views.back().epoch = 2;
    everyone.push_back(r);
  }
  expect_exact_next_operation(views, everyone, members);
}

void FailureWalk::expect_exact_next_operation(const std::vector<RingView>& views,
                                              const std::vector<size_t>& ranks, Members& members) {
  const size_t n = views.size();
  auto buffers = make_buffers(n, count(), false, 99);
  std::vector<float> exact(count(), 0.0f);
  for (const auto& b : buffers)
    for (size_t i = 0; i < count(); ++i) exact[i] += b.data[i];
  EndOnExit started;
  auto& ops = started.ops;
  for (size_t i = 0; i < n; ++i) {
    auto op = members.engines[ranks[i]]->allreduce(views[i], spec_for(buffers[i]));
    ASSERT_TRUE(op.is_ok()) << op.status().to_string();
    ops.push_back(*op);
  }
  for (auto& op : ops) ASSERT_TRUE(op->wait().is_ok());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(std::memcmp(buffers[i].data.data(), buffers[0].data.data(), count() * 4), 0)
        << "member " << ranks[i] << " differs from member " << ranks[0];
    if (GetParam().codec == Codec::kNone) {
      EXPECT_EQ(buffers[i].data, exact);
    }
  }
}

TEST_P(FailureWalk, AFaultAtAnyStepFailsEveryMemberAndTheNextOperationIsExact) {
  const auto [schedule, n, codec] = GetParam();
  for (size_t step = 0; step < 2 * steps_per_phase(schedule, n); ++step)
    for (Fault fault : {Fault::kLostPeer, Fault::kAbort, Fault::kCancel}) {
      SCOPED_TRACE(std::string(fault_name(fault)) + " at step " + std::to_string(step));
      ASSERT_NO_FATAL_FAILURE(run_fault_at(step, fault));
    }
}

std::vector<Case> every_case() {
  std::vector<Case> cases;
  for (Schedule s : {Schedule::kRing, Schedule::kDirect})
    for (size_t n : {2, 3, 4})
      for (Codec c : {Codec::kNone, Codec::kU8}) cases.push_back({s, n, c});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schedules, FailureWalk, ::testing::ValuesIn(every_case()), case_name);

}  // namespace
}  // namespace longhaul::collective
