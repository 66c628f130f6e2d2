// longhaul.hpp's collectives: Communicator::allreduce, allreduce_async (an Operation, RAII) and
// allreduce_batch, with an in-process master and two communicators on loopback; failures throw
// longhaul::Error carrying the C status.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.hpp>

namespace {

using namespace std::chrono_literals;

// A master and two admitted communicators in one epoch (ring of two), on ephemeral ports.
class CppCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    master_ = std::make_unique<longhaul::Master>(
        longhaul::MasterOptions{.listen_address = "127.0.0.1:0"});
    master_->run();
    const std::string address = "127.0.0.1:" + std::to_string(master_->port());
    const longhaul::CommunicatorOptions options{.master_address = address,
                                                .listen_address = "127.0.0.1:0"};
    a_ = std::make_unique<longhaul::Communicator>(options);
    b_ = std::make_unique<longhaul::Communicator>(options);
    a_->connect();
    // b is admitted once a reaches update_topology.
    auto joined = std::async(std::launch::async, [this] { b_->connect(); });
    for (int i = 0; i < 1000 && !a_->peers_pending(); ++i) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(a_->peers_pending());
    a_->update_topology();
    joined.get();
    ASSERT_EQ(a_->group_world_size(), 2);
  }

  // Runs `on_a` and `on_b` at once (a collective needs both peers), rethrowing either's error.
  template <class A, class B>
  static void both(A on_a, B on_b) {
    auto other = std::async(std::launch::async, on_b);
    on_a();
    other.get();
  }

  std::unique_ptr<longhaul::Master> master_;
  std::unique_ptr<longhaul::Communicator> a_;
  std::unique_ptr<longhaul::Communicator> b_;
};

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
