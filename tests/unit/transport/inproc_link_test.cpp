// The in-process link's own fault hooks, which the collective tests rely on to stop an operation
// at any step (its DataLink contract is checked beside net::Link in data_link_contract_test).
#include "transport/inproc_link.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

namespace longhaul::transport {
namespace {

class InProcessLinkTest : public ::testing::Test {
 protected:
  InProcessLinkTest() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {
    std::tie(a_, b_) = InProcessLink::pair(io_.get_executor(), "a", "b");
  }
  ~InProcessLinkTest() override {
    a_->fail(closed_error("test over"));
    work_.reset();
    thread_.join();
  }

  // A completion whose outcome a test waits for.
  struct Outcome {
    std::shared_ptr<std::promise<Status>> promise = std::make_shared<std::promise<Status>>();
    std::future<Status> future = promise->get_future();
    Completion callback() {
      return [p = promise](Status s) { p->set_value(std::move(s)); };
    }
    bool ready() {
      return future.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready;
    }
  };

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::shared_ptr<InProcessLink> a_, b_;
};

TEST_F(InProcessLinkTest, NamesEachEndsPeer) {
  EXPECT_EQ(a_->peer(), "b");
  EXPECT_EQ(b_->peer(), "a");
}

TEST_F(InProcessLinkTest, HeldSendsWaitUntilReleasedThenArriveInPostingOrder) {
  a_->hold_sends([](Tag t) { return t >= 10; });
  std::vector<std::byte> src{std::byte{1}, std::byte{2}}, d10(2), d11(2), d1(2);
  Outcome s10, s11, s1, r10, r11, r1;
  b_->recv(10, d10, r10.callback());
  b_->recv(11, d11, r11.callback());
  b_->recv(1, d1, r1.callback());
  a_->send(10, src, s10.callback());
  a_->send(11, src, s11.callback());
  a_->send(1, src, s1.callback());  // not held
  EXPECT_TRUE(s1.future.get().is_ok());
  EXPECT_TRUE(r1.future.get().is_ok());
  EXPECT_EQ(a_->held_sends(), 2u);
  EXPECT_FALSE(s10.ready()) << "a held send completed";
  EXPECT_FALSE(r10.ready());
  a_->release_held();
  for (Outcome* o : {&s10, &s11, &r10, &r11}) EXPECT_TRUE(o->future.get().is_ok());
  EXPECT_EQ(d10, src);
  EXPECT_EQ(a_->held_sends(), 0u);
}

TEST_F(InProcessLinkTest, ACancelOrAFailureEndsHeldSends) {
  a_->hold_sends([](Tag) { return true; });
  std::vector<std::byte> src(8);
  Outcome cancelled, failed;
  a_->send(0x100, src, cancelled.callback());
  a_->send(0x200, src, failed.callback());
  a_->cancel_matching(0x100, ~Tag{0xFF}, aborted_error("cancel"));
  EXPECT_EQ(cancelled.future.get().code(), LH_ERR_ABORTED);
  EXPECT_EQ(a_->held_sends(), 1u);
  b_->fail(peer_lost("crash"));
  EXPECT_EQ(failed.future.get().code(), LH_ERR_PEER_LOST);
  EXPECT_EQ(a_->held_sends(), 0u);
}

TEST_F(InProcessLinkTest, CompletionsRunOnTheExecutorNotInsideThePost) {
  std::vector<std::byte> src(4), dst(4);
  const auto caller = std::this_thread::get_id();
  std::promise<std::thread::id> ran_on;
  b_->recv(3, dst, [&](Status) {});
  a_->send(3, src, [&](Status) { ran_on.set_value(std::this_thread::get_id()); });
  EXPECT_NE(ran_on.get_future().get(), caller);
}

}  // namespace
}  // namespace longhaul::transport
