// longhaul.hpp's collectives: Communicator::allreduce, allreduce_async (an Operation, RAII),
// allreduce_batch, reduce_scatter, allgather, broadcast and barrier (blocking and async), with an
// in-process master and two communicators on loopback; failures throw longhaul::Error carrying the
// C status.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.hpp>

#include "comm_pair.hpp"

namespace {

using namespace std::chrono_literals;

// A master and two admitted communicators in one epoch (ring of two), on ephemeral ports.
using CppCollectives = longhaul::testing::CommPair;

TEST_F(CppCollectives, AllReduceSumsIntoRecvAndAveragesInPlace) {
  std::vector<float> in_a(1000, 1.0f), in_b(1000, 2.0f), out_a(1000), out_b(1000);
  lh_op_info info{};
  both([&] { info = a_->allreduce(std::span<const float>(in_a), std::span(out_a)); },
       [&] { b_->allreduce(std::span<const float>(in_b), std::span(out_b)); });
  EXPECT_EQ(out_a[999], 3.0f);
  EXPECT_EQ(out_b[0], 3.0f);
  EXPECT_EQ(in_a[0], 1.0f);
  EXPECT_EQ(info.world_size, 2u);
  EXPECT_GT(info.bytes_sent, 0u);

  std::vector<int32_t> xa(10, 4), xb(10, 8);
  both([&] { a_->allreduce(std::span(xa), longhaul::ReduceOp::kAvg); },
       [&] { b_->allreduce(std::span(xb), longhaul::ReduceOp::kAvg); });
  EXPECT_EQ(xa[3], 6);
  EXPECT_EQ(xb[9], 6);
}

TEST_F(CppCollectives, AnAsyncOperationIsWaitedForAndReportsItsInfo) {
  std::vector<double> xa(4096, 1.5), xb(4096, 2.5);
  longhaul::Operation op_a = a_->allreduce_async(std::span(xa), longhaul::ReduceOp::kMax);
  {
    // Destroying an Operation waits for it: b's result is complete when the scope ends.
    longhaul::Operation op_b = b_->allreduce_async(std::span(xb), longhaul::ReduceOp::kMax);
  }
  EXPECT_EQ(xb[100], 2.5);
  op_a.wait();
  EXPECT_TRUE(op_a.test());
  EXPECT_EQ(xa[4095], 2.5);
  EXPECT_EQ(op_a.info().world_size, 2u);
  op_a.wait();  // any number of times

  longhaul::Operation moved = std::move(op_a);
  EXPECT_TRUE(moved.test());
}

TEST_F(CppCollectives, ABatchReducesEveryBufferAndAResidualWithinABatchOfOne) {
  std::vector<float> a1(100, 1.0f), a2(7, 10.0f), b1(100, 2.0f), b2(7, 20.0f);
  const std::vector<std::span<float>> batch_a{a1, a2}, batch_b{b1, b2};
  both([&] { a_->allreduce_batch(std::span(batch_a), 3); },
       [&] { b_->allreduce_batch(std::span(batch_b), 3); });
  EXPECT_EQ(a1[50], 3.0f);
  EXPECT_EQ(a2[6], 30.0f);
  EXPECT_EQ(b2[0], 30.0f);

  std::vector<float> qa(256, 1.0f), qb(256, 3.0f), ra(256, 0.0f), rb(256, 0.0f);
  const std::vector<std::span<float>> one_a{qa}, one_b{qb};
  longhaul::AllReduceOptions oa{.codec = LH_CODEC_U8, .residual = ra};
  longhaul::AllReduceOptions ob{.codec = LH_CODEC_U8, .residual = rb};
  both([&] { a_->allreduce_batch(std::span(one_a), 3, longhaul::ReduceOp::kSum, oa); },
       [&] { b_->allreduce_batch(std::span(one_b), 3, longhaul::ReduceOp::kSum, ob); });
  EXPECT_NEAR(qa[17], 4.0f, 0.05f);
  EXPECT_EQ(qa, qb);
}

TEST_F(CppCollectives, AllGatherPutsEveryContributionInRingOrderWithUnevenCounts) {
  // a and b contribute 2 and 3 values; which one is ring position 0 is the ring's business.
  const bool a_first = a_->rank() == 0;
  std::vector<int32_t> mine_a{1, 2}, mine_b{3, 4, 5};
  const std::vector<size_t> counts =
      a_first ? std::vector<size_t>{2, 3} : std::vector<size_t>{3, 2};
  std::vector<int32_t> all_a(5), all_b(5);
  both([&] { a_->allgather(std::span<const int32_t>(mine_a), std::span(all_a), {}, counts); },
       [&] { b_->allgather(std::span<const int32_t>(mine_b), std::span(all_b), {}, counts); });
  const std::vector<int32_t> expected =
      a_first ? std::vector<int32_t>{1, 2, 3, 4, 5} : std::vector<int32_t>{3, 4, 5, 1, 2};
  EXPECT_EQ(all_a, expected);
  EXPECT_EQ(all_b, expected);

  std::vector<float> one_a{1.5f}, one_b{2.5f}, got_a(2), got_b(2);
  longhaul::Operation op = a_->allgather_async(std::span<const float>(one_a), std::span(got_a));
  b_->allgather(std::span<const float>(one_b), std::span(got_b));
  op.wait();
  EXPECT_EQ(got_a, got_b);
  EXPECT_EQ(got_a[a_->rank()], 1.5f);
}

TEST_F(CppCollectives, ReduceScatterGivesEachPeerItsSummedPart) {
  std::vector<double> in_a{1, 2, 3, 4}, in_b{10, 20, 30, 40}, part_a(2), part_b(2);
  both([&] { a_->reduce_scatter(std::span<const double>(in_a), std::span(part_a)); },
       [&] { b_->reduce_scatter(std::span<const double>(in_b), std::span(part_b)); });
  const std::vector<double> first{11, 22}, second{33, 44};
  EXPECT_EQ(part_a, a_->rank() == 0 ? first : second);
  EXPECT_EQ(part_b, a_->rank() == 0 ? second : first);
  longhaul::Operation op = a_->reduce_scatter_async(std::span<const double>(in_a),
                                                    std::span(part_a), longhaul::ReduceOp::kMax);
  b_->reduce_scatter(std::span<const double>(in_b), std::span(part_b), longhaul::ReduceOp::kMax);
  op.wait();
  EXPECT_EQ(part_a[0], a_->rank() == 0 ? 10.0 : 30.0);
}

TEST_F(CppCollectives, BroadcastAndBarrierReachEveryPeer) {
  const uint32_t root = static_cast<uint32_t>(b_->rank());
  std::vector<uint32_t> at_a(6, 0), at_b{5, 6, 7, 8, 9, 10};
  both([&] { a_->broadcast(std::span(at_a), root); },
       [&] { b_->broadcast(std::span(at_b), root); });
  EXPECT_EQ(at_a, at_b);
  longhaul::Operation barrier = a_->barrier_async();
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(barrier.test()) << "a left the barrier before b entered it";
  const lh_op_info info = b_->barrier();
  barrier.wait();
  EXPECT_EQ(info.world_size, 2u);
  EXPECT_EQ(info.bytes_sent, 0u);
}

TEST_F(CppCollectives, TheOtherCollectivesRefuseBadArguments) {
  std::vector<float> four(4), three(3);
  try {
    a_->allgather(std::span<const float>(four), std::span(three));  // recv must hold 8
    ADD_FAILURE() << "no throw";
  } catch (const longhaul::Error& e) {
    EXPECT_EQ(e.status(), LH_ERR_INVALID_ARGUMENT);
  }
  try {
    a_->broadcast(std::span(four), /*root=*/7);
    ADD_FAILURE() << "no throw";
  } catch (const longhaul::Error& e) {
    EXPECT_EQ(e.status(), LH_ERR_INVALID_ARGUMENT);
  }
  // recv inside send; a codec on a barrier: refused before anything is sent.
  EXPECT_EQ(lh_reduce_scatter(a_->get(), four.data(), four.data() + 2, 2, nullptr, LH_DTYPE_F32,
                              LH_OP_SUM, nullptr, nullptr),
            LH_ERR_INVALID_ARGUMENT);
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  o.codec = LH_CODEC_U8;
  EXPECT_EQ(lh_barrier(a_->get(), &o, nullptr), LH_ERR_INVALID_ARGUMENT);
  const size_t wrong[] = {1, 1};  // this peer's entry differs from send_count
  EXPECT_EQ(
      lh_allgather(a_->get(), four.data(), 4, four.data(), wrong, LH_DTYPE_F32, nullptr, nullptr),
      LH_ERR_INVALID_ARGUMENT);
}

TEST_F(CppCollectives, BadArgumentsThrowAnErrorCarryingTheStatus) {
  std::vector<float> x(8), y(9), r(8);
  try {
    a_->allreduce(std::span<const float>(x), std::span(y));
    FAIL() << "sizes differ";
  } catch (const longhaul::Error& e) {
    EXPECT_EQ(e.status(), LH_ERR_INVALID_ARGUMENT);
  }
  // The C layer's rule: a residual serves a batch of one.
  const std::vector<std::span<float>> two{x, std::span(y).first(8)};
  longhaul::AllReduceOptions with_residual{.codec = LH_CODEC_U8, .residual = r};
  try {
    a_->allreduce_batch(std::span(two), 1, longhaul::ReduceOp::kSum, with_residual);
    FAIL() << "a residual with two buffers";
  } catch (const longhaul::Error& e) {
    EXPECT_EQ(e.status(), LH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("batch of one"), std::string::npos) << e.what();
  }
  // A quantizing codec needs f32 data: refused before anything is sent.
  std::vector<double> d(8);
  EXPECT_THROW(a_->allreduce_async(std::span(d), longhaul::ReduceOp::kSum,
                                   longhaul::AllReduceOptions{.codec = LH_CODEC_U8}),
               longhaul::Error);
}

}  // namespace
