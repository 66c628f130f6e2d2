// lh_comm_get_traffic through the C API: an in-process master and two communicators on loopback.
// An all-reduce's bytes land in the data counts, the master's messages in the control counts and
// a state sync's blocks in the state counts, each side's sent matching the other side's received.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <longhaul/longhaul.h>

namespace {

using namespace std::chrono_literals;

lh_traffic traffic_of(lh_comm* c) {
  lh_traffic t{};
  EXPECT_EQ(lh_comm_get_traffic(c, &t), LH_OK) << lh_comm_last_error(c);
  return t;
}

// A master and two admitted communicators in one epoch (ring of two), on ephemeral ports.
class CommTraffic : public ::testing::Test {
 protected:
  void SetUp() override {
    lh_master_options mo;
    lh_master_options_init(&mo);
    mo.listen_address = "127.0.0.1:0";
    ASSERT_EQ(lh_master_create(&mo, &master_), LH_OK) << lh_last_error();
    ASSERT_EQ(lh_master_run(master_), LH_OK);
    uint16_t port = 0;
    ASSERT_EQ(lh_master_port(master_, &port), LH_OK);
    address_ = "127.0.0.1:" + std::to_string(port);
    a_ = make();
    b_ = make();
    ASSERT_TRUE(a_ && b_);
    ASSERT_EQ(lh_comm_connect(a_), LH_OK) << lh_comm_last_error(a_);
    // b is admitted once a reaches update_topology.
    auto joined = std::async(std::launch::async, [this] { return lh_comm_connect(b_); });
    int pending = 0;
    for (int i = 0; i < 1000 && !pending; ++i) {
      lh_comm_are_peers_pending(a_, &pending);
      if (!pending) std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(pending, 1);
    ASSERT_EQ(lh_comm_update_topology(a_), LH_OK) << lh_comm_last_error(a_);
    ASSERT_EQ(joined.get(), LH_OK) << lh_comm_last_error(b_);
  }

  void TearDown() override {
    lh_comm_destroy(a_);
    lh_comm_destroy(b_);
    lh_master_destroy(master_);
  }

  lh_comm* make() {
    lh_comm_options o;
    lh_comm_options_init(&o);
    o.master_address = address_.c_str();
    o.listen_address = "127.0.0.1:0";
    o.connections_per_link = 2;
    lh_comm* c = nullptr;
    EXPECT_EQ(lh_comm_create(&o, &c), LH_OK) << lh_last_error();
    return c;
  }

  lh_master* master_ = nullptr;
  std::string address_;
  lh_comm* a_ = nullptr;
  lh_comm* b_ = nullptr;
};

// Polls until `read()` returns `expected` or 10 s pass; returns the last value. A link that closed
// after a sync may still be finishing its last count when the sync returns.
template <class Read>
uint64_t await_value(Read read, uint64_t expected) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  uint64_t v = read();
  while (v != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);
    v = read();
  }
  return v;
}

// The two peers' counts once every data frame between them is counted at both ends. A sender
// counts a frame when its write completes, which can come after the receiver has counted it: the
// join's last frame (b's PEER_HELLO_ACK, 49 bytes) once was in a's count and not yet in b's, and
// the deltas then differed by exactly that frame. Polls for up to 10 s.
std::pair<lh_traffic, lh_traffic> agreed_data_counts(lh_comm* a, lh_comm* b) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    const lh_traffic ta = traffic_of(a), tb = traffic_of(b);
    const bool agreed = ta.data_sent == tb.data_received && tb.data_sent == ta.data_received;
    if (agreed || std::chrono::steady_clock::now() >= deadline) return {ta, tb};
    std::this_thread::sleep_for(2ms);
  }
}

TEST_F(CommTraffic, AnAllReduceCountsAsDataAndTheMasterAsControl) {
  const auto [a0, b0] = agreed_data_counts(a_, b_);
  // Joining took control messages and the mesh's hellos; no state sync ran.
  EXPECT_GT(a0.control_sent, 0u);
  EXPECT_GT(a0.control_received, 0u);
  EXPECT_GT(a0.data_sent + a0.data_received, 0u);
  EXPECT_EQ(a0.state_sent + a0.state_received + b0.state_sent + b0.state_received, 0u);

  constexpr size_t kCount = size_t{3} << 20;  // 12 MiB of f32 per peer
  std::vector<float> in_a(kCount, 1.0f), in_b(kCount, 2.0f), out_a(kCount), out_b(kCount);
  lh_op_info info_a{}, info_b{};
  auto other = std::async(std::launch::async, [&] {
    return lh_allreduce(b_, in_b.data(), out_b.data(), kCount, LH_DTYPE_F32, LH_OP_SUM, nullptr,
                        &info_b);
  });
  ASSERT_EQ(lh_allreduce(a_, in_a.data(), out_a.data(), kCount, LH_DTYPE_F32, LH_OP_SUM, nullptr,
                         &info_a),
            LH_OK)
      << lh_comm_last_error(a_);
  ASSERT_EQ(other.get(), LH_OK) << lh_comm_last_error(b_);
  ASSERT_EQ(out_a[12345], 3.0f);

  const auto [a1, b1] = agreed_data_counts(a_, b_);
  const uint64_t a_sent = a1.data_sent - a0.data_sent;
  ASSERT_GT(info_a.bytes_sent, 0u);
  // The all-reduce's payload plus a 32-byte header per segment of at most 1 MiB.
  EXPECT_GE(a_sent, info_a.bytes_sent);
  EXPECT_LE(a_sent, info_a.bytes_sent + 32 * (info_a.bytes_sent / (1 << 20) + 64));
  // Nothing else travels on the data links: what one side wrote, the other read.
  EXPECT_EQ(a_sent, b1.data_received - b0.data_received);
  EXPECT_EQ(b1.data_sent - b0.data_sent, a1.data_received - a0.data_received);
  // Heartbeats and the join, against megabytes of data.
  EXPECT_LT(a1.control_sent + a1.control_received, 64u << 10);
  EXPECT_LT(b1.control_sent + b1.control_received, 64u << 10);
  EXPECT_EQ(a1.state_sent + a1.state_received, 0u);
}

// lh_comm_destroy's contract: the communicator's lh_op handles stay valid. A completed operation
// destroyed after its communicator used to hold the last references to the data links, whose
// destruction then locked a strand of the runtime already gone: the Python bindings' garbage
// collector hung there.
TEST_F(CommTraffic, ACompletedOperationIsDestroyedAfterItsCommunicator) {
  constexpr size_t kCount = 4096;
  std::vector<float> in_a(kCount, 1.0f), in_b(kCount, 2.0f), out_a(kCount), out_b(kCount);
  lh_op *op_a = nullptr, *op_b = nullptr;
  ASSERT_EQ(lh_allreduce_async(a_, in_a.data(), out_a.data(), kCount, LH_DTYPE_F32, LH_OP_SUM,
                               nullptr, &op_a),
            LH_OK)
      << lh_comm_last_error(a_);
  ASSERT_EQ(lh_allreduce_async(b_, in_b.data(), out_b.data(), kCount, LH_DTYPE_F32, LH_OP_SUM,
                               nullptr, &op_b),
            LH_OK)
      << lh_comm_last_error(b_);
  EXPECT_EQ(lh_op_wait(op_a), LH_OK);
  EXPECT_EQ(lh_op_wait(op_b), LH_OK);
  EXPECT_EQ(out_b[kCount - 1], 3.0f);
  lh_comm_destroy(a_);
  lh_comm_destroy(b_);
  a_ = b_ = nullptr;
  lh_op_destroy(op_a);
  lh_op_destroy(op_b);
}

TEST_F(CommTraffic, AStateSyncCountsItsBlocksAsState) {
  // 5 MiB and a bit of random f32 that a holds and b, a joiner, takes: every block travels raw.
  constexpr size_t kCount = (size_t{5} << 18) + 7;
  std::vector<float> held(kCount), taken(kCount, 0.0f);
  std::mt19937 rng(7);
  for (auto& x : held) x = static_cast<float>(rng());
  lh_state* sa = nullptr;
  lh_state* sb = nullptr;
  ASSERT_EQ(lh_state_create(&sa), LH_OK);
  ASSERT_EQ(lh_state_create(&sb), LH_OK);
  std::unique_ptr<lh_state, decltype(&lh_state_destroy)> own_a(sa, lh_state_destroy);
  std::unique_ptr<lh_state, decltype(&lh_state_destroy)> own_b(sb, lh_state_destroy);
  ASSERT_EQ(lh_state_add_tensor(sa, "w", held.data(), kCount, LH_DTYPE_F32), LH_OK);
  ASSERT_EQ(lh_state_add_tensor(sb, "w", taken.data(), kCount, LH_DTYPE_F32), LH_OK);

  const lh_traffic a0 = traffic_of(a_), b0 = traffic_of(b_);
  lh_sync_info info_a{}, info_b{};
  auto joiner = std::async(std::launch::async,
                           [&] { return lh_sync_state(b_, sb, LH_SYNC_RECEIVE_ONLY, &info_b); });
  ASSERT_EQ(lh_sync_state(a_, sa, LH_SYNC_ENFORCE_POPULAR, &info_a), LH_OK)
      << lh_comm_last_error(a_);
  ASSERT_EQ(joiner.get(), LH_OK) << lh_comm_last_error(b_);
  ASSERT_EQ(std::memcmp(held.data(), taken.data(), kCount * sizeof(float)), 0);
  const uint64_t tensor_bytes = kCount * sizeof(float);
  ASSERT_EQ(info_b.rx_bytes, tensor_bytes);

  const lh_traffic a1 = traffic_of(a_), b1 = traffic_of(b_);
  EXPECT_GE(b1.state_received, tensor_bytes);
  EXPECT_GE(a1.state_sent, info_a.tx_bytes);
  EXPECT_GT(b1.state_sent, 0u) << "the block requests";
  EXPECT_EQ(await_value([&] { return traffic_of(b_).state_received; }, a1.state_sent),
            a1.state_sent);
  EXPECT_EQ(await_value([&] { return traffic_of(a_).state_received; }, b1.state_sent),
            b1.state_sent);
  // The blocks' requests and answers are headers and a few bytes each, not another copy.
  EXPECT_LT(b1.state_received - tensor_bytes, 64u << 10);
  // The sync used no data link, and its reports and plan went through the master.
  EXPECT_EQ(a1.data_sent, a0.data_sent);
  EXPECT_EQ(a1.data_received, a0.data_received);
  EXPECT_EQ(b1.data_sent, b0.data_sent);
  EXPECT_EQ(b1.data_received, b0.data_received);
  EXPECT_GT(b1.control_sent, b0.control_sent);
}

TEST(CommTrafficArguments, NullArgumentsAreRefused) {
  lh_traffic t{};
  EXPECT_EQ(lh_comm_get_traffic(nullptr, &t), LH_ERR_INVALID_ARGUMENT);
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = "127.0.0.1:1";  // never contacted: no connect
  o.listen_address = "127.0.0.1:0";
  lh_comm* c = nullptr;
  ASSERT_EQ(lh_comm_create(&o, &c), LH_OK) << lh_last_error();
  EXPECT_EQ(lh_comm_get_traffic(c, nullptr), LH_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(lh_comm_get_traffic(c, &t), LH_OK);
  EXPECT_EQ(t.data_sent + t.data_received + t.control_sent + t.control_received + t.state_sent +
                t.state_received,
            0u);
  lh_comm_destroy(c);
}

}  // namespace
