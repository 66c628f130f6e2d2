// lh_sparse_allgather (issue 48, part 2) through the C API and longhaul.hpp: an in-process master
// and communicators on loopback, ephemeral ports. Every member receives every contribution, bit
// for bit, in ring order, whatever their sizes (zero included), on the ring and on the direct
// schedule; a member destroyed mid-transfer fails the others instead of hanging them; a joiner
// is in the next call; a malformed sparse encoding is refused alike on every member, naming its
// peer; the blocking form can be settled with the group; bad arguments are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.h>
#include <longhaul/longhaul.hpp>

#include "capi_handles.hpp"
#include "comm_pair.hpp"
#include "quant/sparse_codec.hpp"

namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::byte>;

using longhaul::capi_test::CommPtr;
using longhaul::capi_test::CommSettings;
using longhaul::capi_test::MasterPtr;
struct ResultDeleter {
  void operator()(lh_sparse_gathered* r) const { lh_sparse_gathered_destroy(r); }
};
struct OpDeleter {
  void operator()(lh_op* op) const { lh_op_destroy(op); }
};
using ResultPtr = std::unique_ptr<lh_sparse_gathered, ResultDeleter>;
using OpPtr = std::unique_ptr<lh_op, OpDeleter>;

MasterPtr make_master() {
  return longhaul::capi_test::start_loopback_master();
}

// Striped links (2 connections each), and a patient connect: members join one after another.
CommPtr make_comm(lh_master* master, CommSettings s) {
  s.connections_per_link = 2;
  s.connect_timeout_ms = 30000;
  return longhaul::capi_test::connect_to_master(master, s);
}

// `n` communicators with min_peers = n, connected at once: the group forms whole.
std::vector<CommPtr> connect_group(lh_master* master, size_t n, CommSettings s = {}) {
  s.min_peers = static_cast<uint32_t>(n);
  std::vector<CommPtr> comms;
  for (size_t i = 0; i < n; ++i) comms.push_back(make_comm(master, s));
  std::vector<std::future<lh_status>> connected;
  for (auto& c : comms)
    connected.push_back(std::async(std::launch::async, [&c] { return lh_comm_connect(c.get()); }));
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(connected[i].get(), LH_OK) << lh_comm_last_error(comms[i].get());
  return comms;
}

int64_t attribute(lh_comm* c, lh_attribute a) {
  int64_t v = -1;
  EXPECT_EQ(lh_comm_get_attribute(c, a, &v), LH_OK);
  return v;
}

// Member i's contribution of `size` bytes: a pattern no other member's shares.
Bytes pattern(size_t i, size_t size) {
  Bytes b(size);
  std::mt19937_64 rng(1000 + i);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

// What one member's blocking call returned.
struct Outcome {
  lh_status status = LH_ERR_INTERNAL;
  std::string message;
  ResultPtr result;
  lh_op_info info{};
};

// Every communicator calls lh_sparse_allgather with its own contribution, at once.
std::vector<Outcome> gather_all(std::vector<CommPtr>& comms, const std::vector<Bytes>& sends,
                                const lh_sparse_allgather_options* options) {
  std::vector<std::future<Outcome>> running;
  for (size_t i = 0; i < comms.size(); ++i)
    running.push_back(std::async(std::launch::async, [&, i] {
      Outcome o;
      lh_sparse_gathered* r = nullptr;
      o.status = lh_sparse_allgather(comms[i].get(), sends[i].data(), sends[i].size(), options, &r,
                                     &o.info);
      o.message = lh_comm_last_error(comms[i].get());
      o.result.reset(r);
      return o;
    }));
  std::vector<Outcome> out;
  for (auto& f : running) out.push_back(f.get());
  return out;
}

Bytes contribution(const lh_sparse_gathered* r, uint32_t rank) {
  const void* data = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(lh_sparse_gathered_contribution(r, rank, &data, &bytes), LH_OK)
      << lh_sparse_gathered_last_error(r);
  EXPECT_NE(data, nullptr);
  const auto* p = static_cast<const std::byte*>(data);
  return Bytes(p, p + bytes);
}

// Every member's result holds every member's contribution at its ring position, and the results
// are the same bytes on every member.
void expect_everyone_has_everything(std::vector<CommPtr>& comms, const std::vector<Bytes>& sends,
                                    const std::vector<Outcome>& outcomes) {
  const size_t n = comms.size();
  std::vector<Bytes> by_rank(n);
  for (size_t i = 0; i < n; ++i)
    by_rank[static_cast<size_t>(attribute(comms[i].get(), LH_ATTR_RANK))] = sends[i];
  std::vector<Bytes> first;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(outcomes[i].status, LH_OK) << outcomes[i].message;
    const lh_sparse_gathered* r = outcomes[i].result.get();
    ASSERT_NE(r, nullptr);
    uint32_t members = 0, rank = 0;
    ASSERT_EQ(lh_sparse_gathered_members(r, &members, &rank), LH_OK);
    EXPECT_EQ(members, n);
    EXPECT_EQ(rank, attribute(comms[i].get(), LH_ATTR_RANK));
    std::vector<Bytes> mine;
    for (uint32_t p = 0; p < n; ++p) {
      mine.push_back(contribution(r, p));
      EXPECT_EQ(mine.back(), by_rank[p]) << "member " << i << ", ring position " << p;
      uint64_t id = 0;
      ASSERT_EQ(lh_sparse_gathered_peer_id(r, p, &id), LH_OK);
      EXPECT_GT(id, 0u);
      EXPECT_EQ(lh_sparse_gathered_check(r, p), LH_OK);  // no validation: all accepted
    }
    size_t malformed = 99;
    EXPECT_EQ(lh_sparse_gathered_malformed(r, nullptr, 0, &malformed), LH_OK);
    EXPECT_EQ(malformed, 0u);
    if (i == 0)
      first = mine;
    else
      EXPECT_EQ(mine, first) << "member " << i << " holds other bytes than member 0";
  }
}

lh_sparse_allgather_options options_with(lh_schedule schedule, uint32_t segment_bytes) {
  lh_sparse_allgather_options o;
  lh_sparse_allgather_options_init(&o);
  o.schedule = schedule;
  o.segment_bytes = segment_bytes;
  return o;
}

TEST(SparseAllGather, OptionsHaveTheirDocumentedDefaults) {
  lh_sparse_allgather_options o;
  std::memset(&o, 0xff, sizeof(o));
  lh_sparse_allgather_options_init(&o);
  EXPECT_EQ(o.schedule, LH_SCHEDULE_AUTO);
  EXPECT_EQ(o.segment_bytes, 1u << 20);
  EXPECT_EQ(o.validate, LH_SPARSE_VALIDATE_NONE);
  EXPECT_EQ(o.expected_elements, 0u);
  EXPECT_EQ(o.max_total_bytes, 0u);
  EXPECT_EQ(o.max_attempts, 0u);
  lh_sparse_allgather_options_init(nullptr);  // ignored
  const longhaul::SparseAllGatherOptions cpp;
  EXPECT_EQ(cpp.segment_bytes, o.segment_bytes);
  EXPECT_EQ(cpp.validate, o.validate);
}

// Ring, three members, two connections per link, uneven sizes with an empty one and segments
// smaller than the largest contribution (so each travels in many pieces).
TEST(SparseAllGather, EveryMemberGetsEveryContributionBitIdenticalOnTheRing) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 3);
  const std::vector<Bytes> sends{pattern(0, (3u << 20) + 17), pattern(1, 0), pattern(2, 100000)};
  const auto o = options_with(LH_SCHEDULE_RING, 256 << 10);
  auto outcomes = gather_all(comms, sends, &o);
  expect_everyone_has_everything(comms, sends, outcomes);
  size_t total = 0;
  for (const auto& s : sends) total += s.size();
  for (size_t i = 0; i < comms.size(); ++i) {
    EXPECT_EQ(outcomes[i].info.schedule, LH_SCHEDULE_RING);
    EXPECT_EQ(outcomes[i].info.world_size, 3u);
    // Every other contribution once, and the N-1 others' sizes.
    EXPECT_EQ(outcomes[i].info.bytes_received, total - sends[i].size() + 8 * 2);
  }

  // The same group again with other sizes: the calls are independent.
  const std::vector<Bytes> again{pattern(3, 1), pattern(4, 4097), pattern(5, 0)};
  auto second = gather_all(comms, again, &o);
  expect_everyone_has_everything(comms, again, second);
}

class DirectSparseAllGather : public ::testing::TestWithParam<lh_schedule> {};

// Direct (full_mesh) at four members, and auto on the same mesh: each member sends its own
// contribution to the three others and nothing else besides the sizes.
TEST_P(DirectSparseAllGather, EveryMemberGetsEveryContributionBitIdentical) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 4, {.full_mesh = true});
  const std::vector<Bytes> sends{pattern(0, 0), pattern(1, 1), pattern(2, 70000),
                                 pattern(3, (2u << 20) + 3)};
  const auto o = options_with(GetParam(), 512 << 10);
  auto outcomes = gather_all(comms, sends, &o);
  expect_everyone_has_everything(comms, sends, outcomes);
  size_t total = 0;
  for (const auto& s : sends) total += s.size();
  for (size_t i = 0; i < comms.size(); ++i) {
    const lh_op_info& info = outcomes[i].info;
    EXPECT_EQ(info.bytes_received, total - sends[i].size() + 8 * 3);
    if (info.schedule == LH_SCHEDULE_DIRECT) {
      EXPECT_EQ(info.bytes_sent, (sends[i].size() + 8) * 3);
    }
  }
  if (GetParam() == LH_SCHEDULE_DIRECT) {
    EXPECT_EQ(outcomes[0].info.schedule, LH_SCHEDULE_DIRECT);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, DirectSparseAllGather,
                         ::testing::Values(LH_SCHEDULE_DIRECT, LH_SCHEDULE_AUTO));

TEST(SparseAllGather, AllEmptyContributionsSendOnlyTheSizes) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 3);
  const std::vector<Bytes> sends(3);
  auto outcomes = gather_all(comms, sends, nullptr);
  expect_everyone_has_everything(comms, sends, outcomes);
  for (const auto& o : outcomes) EXPECT_EQ(o.info.bytes_received, 8u * 2);
}

TEST(SparseAllGather, AGroupOfOneGetsItsOwnContribution) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 1);
  const std::vector<Bytes> sends{pattern(7, 12345)};
  auto outcomes = gather_all(comms, sends, nullptr);
  expect_everyone_has_everything(comms, sends, outcomes);
  EXPECT_EQ(outcomes[0].info.bytes_sent, 0u);
}

// The async form: the operation to wait on and the result it fills; the result's readers refuse
// before completion and work after it.
// lh_sparse_allgather_async started on every member at once (it returns once the sizes are
// exchanged, so the calls must overlap); what each start returned.
struct Started {
  lh_status status;
  OpPtr op;
  ResultPtr result;
};
std::vector<Started> start_everywhere(const std::vector<CommPtr>& comms,
                                      const std::vector<Bytes>& sends,
                                      const lh_sparse_allgather_options* options) {
  std::vector<std::future<Started>> starting;
  for (size_t i = 0; i < comms.size(); ++i)
    starting.push_back(std::async(std::launch::async, [&, i] {
      lh_op* op = nullptr;
      lh_sparse_gathered* r = nullptr;
      const lh_status s = lh_sparse_allgather_async(comms[i].get(), sends[i].data(),
                                                    sends[i].size(), options, &r, &op);
      return Started{s, OpPtr(op), ResultPtr(r)};
    }));
  std::vector<Started> started;
  for (auto& f : starting) started.push_back(f.get());
  return started;
}

TEST(SparseAllGather, TheAsyncFormFillsItsResultOnceItsOperationCompleted) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 3);
  const std::vector<Bytes> sends{pattern(0, 5 << 20), pattern(1, 3), pattern(2, 0)};
  std::vector<Started> started = start_everywhere(comms, sends, nullptr);
  std::vector<Outcome> outcomes;
  for (size_t i = 0; i < comms.size(); ++i) {
    ASSERT_EQ(started[i].status, LH_OK) << lh_comm_last_error(comms[i].get());
    ASSERT_TRUE(started[i].op && started[i].result);
    int done = 0;
    ASSERT_EQ(lh_op_test(started[i].op.get(), &done), LH_OK);
    uint32_t members = 0, rank = 0;
    const lh_status early = lh_sparse_gathered_members(started[i].result.get(), &members, &rank);
    if (!done) {
      // Not completed yet (member 0's 5 MiB may still travel): refused, not undefined.
      if (early != LH_OK) {
        EXPECT_EQ(early, LH_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(lh_sparse_gathered_last_error(started[i].result.get()))
                      .find("not completed"),
                  std::string::npos);
      }
    }
    ASSERT_EQ(lh_op_wait(started[i].op.get()), LH_OK) << lh_op_last_error(started[i].op.get());
    Outcome o;
    o.status = LH_OK;
    o.result = std::move(started[i].result);
    outcomes.push_back(std::move(o));
  }
  expect_everyone_has_everything(comms, sends, outcomes);

  EXPECT_EQ(lh_sparse_allgather_async(comms[0].get(), nullptr, 0, nullptr, nullptr, nullptr),
            LH_ERR_INVALID_ARGUMENT);
}

// A member destroyed while the contributions travel: the others fail with an error (the lost
// peer, or the master's abort) within seconds instead of waiting for its segments, and a result
// that never completed refuses its readers.
class SparseAllGatherAbort : public ::testing::TestWithParam<lh_schedule> {};

TEST_P(SparseAllGatherAbort, AMemberDestroyedMidTransferFailsTheOthersWithoutAHang) {
  MasterPtr master = make_master();
  // 40 Mbit/s per link: 8 MiB per contribution takes over a second per hop.
  auto comms = connect_group(
      master.get(), 3, {.full_mesh = GetParam() == LH_SCHEDULE_DIRECT, .link_upload_mbit = 40});
  const std::vector<Bytes> sends{pattern(0, 8 << 20), pattern(1, 8 << 20), pattern(2, 8 << 20)};
  const auto o = options_with(GetParam(), 256 << 10);
  std::vector<Started> started = start_everywhere(comms, sends, &o);
  for (size_t i = 0; i < comms.size(); ++i)
    ASSERT_EQ(started[i].status, LH_OK) << lh_comm_last_error(comms[i].get());

  // Mid-transfer: member 0 has received some of the contributions, and is not done.
  lh_traffic t0{};
  ASSERT_EQ(lh_comm_get_traffic(comms[0].get(), &t0), LH_OK);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    lh_traffic t{};
    ASSERT_EQ(lh_comm_get_traffic(comms[0].get(), &t), LH_OK);
    if (t.data_received >= t0.data_received + (1u << 20)) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no contribution bytes arrived";
    std::this_thread::sleep_for(5ms);
  }
  int done = 1;
  ASSERT_EQ(lh_op_test(started[0].op.get(), &done), LH_OK);
  ASSERT_EQ(done, 0) << "the transfer ended before the member was destroyed (too fast a link?)";
  uint32_t members = 0, rank = 0;
  EXPECT_EQ(lh_sparse_gathered_members(started[0].result.get(), &members, &rank),
            LH_ERR_INVALID_ARGUMENT);

  const auto destroyed_at = std::chrono::steady_clock::now();
  comms[2].reset();  // its operation fails with LH_ERR_CLOSED; its handles stay valid
  EXPECT_NE(lh_op_wait(started[2].op.get()), LH_OK);
  for (size_t i = 0; i < 2; ++i) {
    auto waited =
        std::async(std::launch::async, [&, i] { return lh_op_wait(started[i].op.get()); });
    ASSERT_EQ(waited.wait_for(30s), std::future_status::ready) << "member " << i << " hangs";
    const lh_status s = waited.get();
    EXPECT_TRUE(s == LH_ERR_PEER_LOST || s == LH_ERR_ABORTED)
        << "member " << i << ": " << lh_status_string(s) << ": "
        << lh_op_last_error(started[i].op.get());
    // The result of a failed operation: its error, not bytes.
    EXPECT_EQ(lh_sparse_gathered_members(started[i].result.get(), &members, &rank), s);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - destroyed_at, 30s);

  // The survivors re-form and go on without the lost member.
  std::vector<CommPtr> survivors;
  survivors.push_back(std::move(comms[0]));
  survivors.push_back(std::move(comms[1]));
  for (auto& c : started) {
    c.op.reset();
    c.result.reset();
  }
  std::vector<std::future<lh_status>> reforming;
  for (auto& c : survivors)
    reforming.push_back(
        std::async(std::launch::async, [&c] { return lh_comm_update_topology(c.get()); }));
  for (auto& f : reforming) ASSERT_EQ(f.get(), LH_OK);
  ASSERT_EQ(attribute(survivors[0].get(), LH_ATTR_GROUP_WORLD_SIZE), 2);
  const std::vector<Bytes> again{pattern(8, 1000), pattern(9, 0)};
  auto outcomes = gather_all(survivors, again, &o);
  expect_everyone_has_everything(survivors, again, outcomes);
}

INSTANTIATE_TEST_SUITE_P(Schedules, SparseAllGatherAbort,
                         ::testing::Values(LH_SCHEDULE_RING, LH_SCHEDULE_DIRECT));

// A peer that joins between two calls is in the next one.
TEST(SparseAllGather, AJoinerBetweenCallsIsInTheNextCall) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 2);
  std::vector<Bytes> sends{pattern(0, 300), pattern(1, 70000)};
  auto first = gather_all(comms, sends, nullptr);
  expect_everyone_has_everything(comms, sends, first);

  comms.push_back(make_comm(master.get(), {}));
  auto joined =
      std::async(std::launch::async, [&c = comms.back()] { return lh_comm_connect(c.get()); });
  for (size_t i = 0; i < 2; ++i) {
    int pending = 0;
    for (int k = 0; k < 2000 && !pending; ++k) {
      ASSERT_EQ(lh_comm_are_peers_pending(comms[i].get(), &pending), LH_OK);
      if (!pending) std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(pending, 1) << "member " << i << " never saw the joiner";
  }
  std::vector<std::future<lh_status>> admitting;
  for (size_t i = 0; i < 2; ++i)
    admitting.push_back(std::async(std::launch::async,
                                   [&c = comms[i]] { return lh_comm_update_topology(c.get()); }));
  for (auto& f : admitting) ASSERT_EQ(f.get(), LH_OK);
  ASSERT_EQ(joined.get(), LH_OK) << lh_comm_last_error(comms[2].get());
  ASSERT_EQ(attribute(comms[0].get(), LH_ATTR_GROUP_WORLD_SIZE), 3);

  sends.push_back(pattern(2, 4096));
  auto second = gather_all(comms, sends, nullptr);
  expect_everyone_has_everything(comms, sends, second);
}

// A sparse encoding of `count` elements (the codec of part 1), from a seeded random input.
Bytes encoding(uint32_t seed, size_t count) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> in(count), residual(count, 0.0f);
  for (float& x : in) x = normal(rng);
  namespace sparse = longhaul::quant::sparse;
  const sparse::Params params;
  auto max = sparse::max_encoded_size(count, params);
  EXPECT_TRUE(max.is_ok());
  Bytes out(*max);
  auto n = sparse::encode_with_error_feedback(in, residual, out, params);
  EXPECT_TRUE(n.is_ok()) << n.status().to_string();
  out.resize(*n);
  return out;
}

// A malformed contribution is refused on every member alike, naming its peer (id and ring
// position); the others decode and sum to the same bits everywhere.
TEST(SparseAllGather, AMalformedContributionIsRefusedWithItsMemberNamedOnEveryMember) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 3);
  constexpr size_t kElements = 10000;
  std::vector<Bytes> sends{encoding(1, kElements), encoding(2, kElements), encoding(3, kElements)};
  // Member 2's encoding loses its last byte: its last record is cut short.
  sends[2].pop_back();
  lh_sparse_allgather_options o;
  lh_sparse_allgather_options_init(&o);
  o.validate = LH_SPARSE_VALIDATE_CODEC;
  o.expected_elements = kElements;
  o.segment_bytes = 1024;  // several segments per contribution: checked once, when whole
  auto outcomes = gather_all(comms, sends, &o);

  const auto bad_rank = static_cast<uint32_t>(attribute(comms[2].get(), LH_ATTR_RANK));
  const auto bad_id = static_cast<uint64_t>(attribute(comms[2].get(), LH_ATTR_PEER_ID));
  std::vector<std::vector<float>> sums;
  for (size_t i = 0; i < comms.size(); ++i) {
    SCOPED_TRACE("member " + std::to_string(i));
    EXPECT_EQ(outcomes[i].status, LH_ERR_PROTOCOL);
    const std::string named =
        "peer " + std::to_string(bad_id) + " at ring position " + std::to_string(bad_rank);
    EXPECT_NE(outcomes[i].message.find(named), std::string::npos) << outcomes[i].message;
    EXPECT_NE(outcomes[i].message.find("malformed"), std::string::npos) << outcomes[i].message;
    const lh_sparse_gathered* r = outcomes[i].result.get();
    ASSERT_NE(r, nullptr) << "the refusal hands out the result";
    uint32_t ranks[4] = {99, 99, 99, 99};
    size_t count = 0;
    ASSERT_EQ(lh_sparse_gathered_malformed(r, ranks, 4, &count), LH_OK);
    ASSERT_EQ(count, 1u);
    EXPECT_EQ(ranks[0], bad_rank);
    EXPECT_EQ(lh_sparse_gathered_check(r, bad_rank), LH_ERR_PROTOCOL);
    EXPECT_NE(std::string(lh_sparse_gathered_last_error(r)).find(named), std::string::npos);
    uint64_t id = 0;
    ASSERT_EQ(lh_sparse_gathered_peer_id(r, bad_rank, &id), LH_OK);
    EXPECT_EQ(id, bad_id);
    // What the engine does next: decode and sum the accepted ones in ring order.
    std::vector<float> sum(kElements, 0.0f);
    for (uint32_t p = 0; p < 3; ++p) {
      if (p == bad_rank) continue;
      EXPECT_EQ(lh_sparse_gathered_check(r, p), LH_OK);
      const Bytes c = contribution(r, p);
      EXPECT_TRUE(longhaul::quant::sparse::decode_accumulate(c, sum).is_ok());
    }
    sums.push_back(std::move(sum));
  }
  for (size_t i = 1; i < sums.size(); ++i)
    EXPECT_EQ(std::memcmp(sums[i].data(), sums[0].data(), kElements * sizeof(float)), 0);

  // An encoding of the wrong length, and bytes that are no encoding at all: both refused; an
  // empty contribution (nothing to send) is accepted.
  sends = {encoding(4, kElements), encoding(5, kElements / 2), pattern(6, 333)};
  sends[0].clear();
  auto second = gather_all(comms, sends, &o);
  for (size_t i = 0; i < comms.size(); ++i) {
    EXPECT_EQ(second[i].status, LH_ERR_PROTOCOL);
    ASSERT_NE(second[i].result, nullptr);
    size_t count = 0;
    ASSERT_EQ(lh_sparse_gathered_malformed(second[i].result.get(), nullptr, 0, &count), LH_OK);
    EXPECT_EQ(count, 2u);
    EXPECT_NE(second[i].message.find("and 1 more malformed contribution"), std::string::npos)
        << second[i].message;
    const auto r1 = static_cast<uint32_t>(attribute(comms[1].get(), LH_ATTR_RANK));
    EXPECT_EQ(lh_sparse_gathered_check(second[i].result.get(), r1), LH_ERR_PROTOCOL);
    EXPECT_NE(std::string(lh_sparse_gathered_last_error(second[i].result.get()))
                  .find("not the 10000 expected"),
              std::string::npos);
    const auto r0 = static_cast<uint32_t>(attribute(comms[0].get(), LH_ATTR_RANK));
    EXPECT_EQ(lh_sparse_gathered_check(second[i].result.get(), r0), LH_OK);
  }
}

// max_attempts >= 1 settles the blocking call with the group: OK everywhere; the async form
// refuses it.
TEST(SparseAllGather, TheSettledFormSucceedsOnEveryMember) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 3);
  const std::vector<Bytes> sends{pattern(0, 1000), pattern(1, 0), pattern(2, 200000)};
  lh_sparse_allgather_options o;
  lh_sparse_allgather_options_init(&o);
  o.max_attempts = 2;
  auto outcomes = gather_all(comms, sends, &o);
  expect_everyone_has_everything(comms, sends, outcomes);
  // Twice more: the decisions are numbered per epoch.
  outcomes = gather_all(comms, sends, &o);
  expect_everyone_has_everything(comms, sends, outcomes);

  lh_op* op = nullptr;
  lh_sparse_gathered* r = nullptr;
  EXPECT_EQ(
      lh_sparse_allgather_async(comms[0].get(), sends[0].data(), sends[0].size(), &o, &r, &op),
      LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(op, nullptr);
  EXPECT_EQ(r, nullptr);
}

TEST(SparseAllGather, SizesAboveTheLimitAreRefusedOnEveryMemberNamingTheLargest) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 2);
  const std::vector<Bytes> sends{pattern(0, 100), pattern(1, 5000)};
  lh_sparse_allgather_options o;
  lh_sparse_allgather_options_init(&o);
  o.max_total_bytes = 4096;
  auto outcomes = gather_all(comms, sends, &o);
  const auto id = attribute(comms[1].get(), LH_ATTR_PEER_ID);
  for (auto& out : outcomes) {
    EXPECT_EQ(out.status, LH_ERR_PROTOCOL);
    EXPECT_EQ(out.result, nullptr);
    EXPECT_NE(out.message.find("peer " + std::to_string(id)), std::string::npos) << out.message;
  }
  // Nothing was left half way: the next call runs.
  o.max_total_bytes = 0;
  outcomes = gather_all(comms, sends, &o);
  expect_everyone_has_everything(comms, sends, outcomes);
}

TEST(SparseAllGather, BadArgumentsAreRefusedBeforeAnythingIsSent) {
  MasterPtr master = make_master();
  auto comms = connect_group(master.get(), 1);
  lh_comm* c = comms[0].get();
  lh_sparse_gathered* r = nullptr;
  const std::byte one{1};
  EXPECT_EQ(lh_sparse_allgather(c, &one, 1, nullptr, nullptr, nullptr), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(lh_sparse_allgather(nullptr, &one, 1, nullptr, &r, nullptr), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(lh_sparse_allgather(c, nullptr, 1, nullptr, &r, nullptr), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  lh_sparse_allgather_options o;
  lh_sparse_allgather_options_init(&o);
  o.segment_bytes = 0;
  EXPECT_EQ(lh_sparse_allgather(c, &one, 1, &o, &r, nullptr), LH_ERR_INVALID_ARGUMENT);
  lh_sparse_allgather_options_init(&o);
  const int bad = 7;  // what a C caller may pass: no constant of the enum
  static_assert(sizeof(o.validate) == sizeof(bad) && sizeof(o.schedule) == sizeof(bad));
  std::memcpy(&o.validate, &bad, sizeof(bad));
  EXPECT_EQ(lh_sparse_allgather(c, &one, 1, &o, &r, nullptr), LH_ERR_INVALID_ARGUMENT);
  lh_sparse_allgather_options_init(&o);
  o.expected_elements = 10;  // without validation
  EXPECT_EQ(lh_sparse_allgather(c, &one, 1, &o, &r, nullptr), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lh_comm_last_error(c)).find("LH_SPARSE_VALIDATE_CODEC"), std::string::npos);
  lh_sparse_allgather_options_init(&o);
  std::memcpy(&o.schedule, &bad, sizeof(bad));
  EXPECT_EQ(lh_sparse_allgather(c, &one, 1, &o, &r, nullptr), LH_ERR_INVALID_ARGUMENT);
  // The direct schedule needs full_mesh at every group size, one included.
  lh_sparse_allgather_options_init(&o);
  o.schedule = LH_SCHEDULE_DIRECT;
  EXPECT_EQ(lh_sparse_allgather(c, &one, 1, &o, &r, nullptr), LH_ERR_UNSUPPORTED);
  EXPECT_EQ(r, nullptr);
  // Readers of NULL.
  uint32_t n = 0, k = 0;
  EXPECT_EQ(lh_sparse_gathered_members(nullptr, &n, &k), LH_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(lh_sparse_gathered_last_error(nullptr), "");
  lh_sparse_gathered_destroy(nullptr);

  // After all that, a valid call works, and a rank outside the group is refused.
  ASSERT_EQ(lh_sparse_allgather(c, &one, 1, nullptr, &r, nullptr), LH_OK) << lh_comm_last_error(c);
  ResultPtr owned(r);
  const void* data = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(lh_sparse_gathered_contribution(r, 1, &data, &bytes), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(lh_sparse_gathered_check(r, 5), LH_ERR_INVALID_ARGUMENT);

  // A communicator that left (or was never connected) sends nothing.
  ASSERT_EQ(lh_comm_leave(c, "done"), LH_OK);
  EXPECT_EQ(lh_sparse_allgather(c, &one, 1, nullptr, &r, nullptr), LH_ERR_CLOSED);
  lh_op* op = nullptr;
  EXPECT_EQ(lh_sparse_allgather_async(c, &one, 1, nullptr, &r, &op), LH_ERR_CLOSED);
  EXPECT_EQ(op, nullptr);
}

// longhaul.hpp: the blocking and async wrappers, and the exception that carries a refusal.
using CppSparseAllGather = longhaul::testing::CommPair;

TEST_F(CppSparseAllGather, TheWrappersGatherAndThrowTheRefusalWithTheResult) {
  const Bytes mine_a = pattern(0, 777), mine_b = pattern(1, 0);
  std::optional<longhaul::SparseGathered> got_a, got_b;
  both([&] { got_a.emplace(a_->sparse_allgather(mine_a)); },
       [&] { got_b.emplace(b_->sparse_allgather(mine_b)); });
  ASSERT_EQ(got_a->members(), 2u);
  const size_t ra = a_->rank(), rb = b_->rank();
  EXPECT_EQ(got_a->rank(), ra);
  for (const auto* g : {&*got_a, &*got_b}) {
    EXPECT_TRUE(std::ranges::equal(g->contribution(ra), mine_a));
    EXPECT_TRUE((*g)[rb].empty());
    EXPECT_TRUE(g->accepted(ra));
    EXPECT_TRUE(g->malformed().empty());
  }

  // Async: the operation, then the result. The call itself waits for the size exchange, so the
  // other member must be calling meanwhile.
  std::optional<longhaul::SparseAllGatherAsync> async_a;
  both([&] { async_a.emplace(a_->sparse_allgather_async(mine_a)); },
       [&] { b_->sparse_allgather(mine_b); });
  async_a->operation.wait();
  EXPECT_TRUE(std::ranges::equal(async_a->gathered.contribution(ra), mine_a));

  // Validation: b's bytes are no encoding.
  const Bytes good = encoding(9, 512), junk = pattern(2, 40);
  const longhaul::SparseAllGatherOptions checked{.validate = LH_SPARSE_VALIDATE_CODEC};
  std::vector<uint32_t> refused_a, refused_b;
  std::string why;
  both(
      [&] {
        try {
          a_->sparse_allgather(good, checked);
        } catch (const longhaul::MalformedContributions& e) {
          refused_a = e.ranks();
          EXPECT_EQ(e.status(), LH_ERR_PROTOCOL);
          EXPECT_FALSE(e.gathered().accepted(rb, &why));
          EXPECT_TRUE(std::ranges::equal(e.gathered().contribution(rb), junk));
        }
      },
      [&] {
        try {
          b_->sparse_allgather(junk, checked);
        } catch (const longhaul::MalformedContributions& e) {
          refused_b = e.ranks();
        }
      });
  EXPECT_EQ(refused_a, std::vector<uint32_t>{static_cast<uint32_t>(rb)});
  EXPECT_EQ(refused_b, refused_a);
  EXPECT_NE(why.find("bad magic"), std::string::npos) << why;
}

}  // namespace
