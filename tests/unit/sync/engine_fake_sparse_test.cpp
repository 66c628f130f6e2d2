// The sync engine with the sparse codec over a fake group: DiLoCo and Streaming DiLoCo keep θ_g
// bit-identical and equal to the members' encodings summed in ring order; the residual is carried
// from round to round and through a checkpoint; a malformed encoding is left out and named; a
// joiner comes in between rounds; each round sends (N − 1) encodings.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fake_trainers.hpp"
#include "quant/sparse_codec.hpp"
#include "sync/checkpoint.hpp"

namespace longhaul::sync::testing {
namespace {

constexpr uint32_t kChunk = 16, kTopk = 3;  // 64 parameters: 4 chunks, 3 values sent of each 16

EngineOptions sparse_options(uint32_t sync_every, uint32_t fragments = 1, uint32_t delay = 0) {
  EngineOptions o = options(sync_every, fragments, delay);
  o.sparse = {true, kTopk, kChunk};
  return o;
}

quant::sparse::Params codec() {
  quant::sparse::Params p;
  p.chunk = kChunk;
  p.topk = kTopk;
  return p;
}

std::vector<float> theta(const Trainer& t) {
  const auto g = t.engine->theta_g(0);
  return {g.begin(), g.end()};
}

// θ_g after one DiLoCo round at lr 1 without momentum from `theta_g`, every member with a zero
// residual: each counted member's Δ encoded by the codec itself, the encodings decoded and summed
// in ring order (`locals` are in ring order), and the sum divided by the count, as the engine's
// rule says (docs/training.md, "Sparse pseudo-gradients").
std::vector<float> expected_round(const std::vector<float>& theta_g,
                                  const std::vector<std::vector<float>>& locals,
                                  const std::vector<bool>& counted) {
  std::vector<float> sum(theta_g.size(), 0.0f);
  size_t n = 0;
  for (size_t m = 0; m < locals.size(); ++m) {
    if (!counted[m]) continue;
    std::vector<float> delta(theta_g.size()), residual(theta_g.size(), 0.0f);
    for (size_t i = 0; i < delta.size(); ++i) delta[i] = theta_g[i] - locals[m][i];
    std::vector<std::byte> bytes(*quant::sparse::max_encoded_size(delta.size(), codec()));
    auto written = quant::sparse::encode_with_error_feedback(delta, residual, bytes, codec());
    EXPECT_TRUE(written.is_ok());
    bytes.resize(*written);
    EXPECT_TRUE(quant::sparse::decode_accumulate(bytes, sum));
    ++n;
  }
  std::vector<float> out(theta_g);
  for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] - sum[i] / static_cast<float>(n);
  return out;
}

class TempDir {
 public:
  TempDir()
      : dir_(std::filesystem::temp_directory_path() /
             ("lh-sync-sparse-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string path(size_t i) const { return (dir_ / ("engine" + std::to_string(i))).string(); }

 private:
  std::filesystem::path dir_;
};

// Every trainer's parameters before its step `step` (after its inner step), by trainer.
BeforeStep capture(std::vector<std::vector<float>>& into, uint64_t step) {
  return [&into, step](size_t i, uint64_t s, Trainer& tr) {
    if (s == step) into[i] = tr.flat();
    return true;
  };
}

TEST(EngineFakeSparse, ADiLoCoRoundIsTheMeanOfTheMembersDecodedEncodings) {
  FakeWorld world;
  auto t = trainers(world.form(3), {0.0f, 0.0f, 0.0f});
  start_all(t, sparse_options(2));
  const std::vector<float> start = theta(t[0]);
  std::vector<std::vector<float>> locals(3);
  run_until(t, 2, capture(locals, 2));
  for (const auto& tr : t) ASSERT_TRUE(tr.status) << tr.status.to_string();
  expect_identical(t);
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 3}));  // trainer i is ring position i
  EXPECT_EQ(theta(t[0]), expected_round(start, locals, {true, true, true}));
  EXPECT_NE(theta(t[0]), start);
  const auto stats = t[0].engine->stats();
  ASSERT_TRUE(stats.last_round);
  EXPECT_EQ(stats.last_round->participants, 3u);
  EXPECT_TRUE(stats.last_round->malformed_peers.empty());
  EXPECT_GT(stats.last_round->encoded_bytes, 0u);
}

TEST(EngineFakeSparse, DiLoCoOverManyRoundsKeepsEveryMemberIdentical) {
  FakeWorld world;
  auto t = trainers(world.form(4), {1.0f, 1.0f, 1.0f, 1.0f});
  auto o = sparse_options(3);
  o.nesterov = {0.7f, 0.9f};
  start_all(t, o);
  run_until(t, 15);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(tr.engine->stats().rounds_applied, 5u);
    EXPECT_EQ(tr.engine->stats().rounds_dropped, 0u);
    EXPECT_EQ(tr.engine->stats().last_round->participants, 4u);
  }
  expect_identical(t);
  EXPECT_TRUE(all_finite(t[0].engine->theta_g(0)));
}

TEST(EngineFakeSparse, StreamingDiLoCoAppliesEveryFragmentsRoundsAfterTheirDelay) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 2.0f, 3.0f});
  start_all(t, sparse_options(3, /*fragments=*/3, /*delay=*/1));
  run_until(t, 12);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(tr.engine->stats().rounds_applied, 9u);
  }
  close_all(t);
  for (const auto& tr : t) EXPECT_EQ(tr.engine->stats().rounds_applied, 10u);
  expect_identical(t);
}

// Member 2 corrupts the version byte of its encodings: every member refuses them alike, names
// peer 2, and applies the mean of the two others.
TEST(EngineFakeSparse, AMalformedEncodingIsLeftOutAndNamedAndTheOthersApplied) {
  FakeWorld world;
  auto t = trainers(world.form(3), {0.0f, 0.0f, 0.0f});
  start_all(t, sparse_options(2));
  t[1].engine->set_encoding_hook([](uint32_t, std::span<std::byte> bytes) {
    ASSERT_GT(bytes.size(), 4u);
    bytes[4] = std::byte{9};  // the format's version
  });
  const std::vector<float> start = theta(t[0]);
  std::vector<std::vector<float>> locals(3);
  run_until(t, 2, capture(locals, 2));
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    const auto stats = tr.engine->stats();
    EXPECT_EQ(stats.rounds_applied, 1u);
    EXPECT_EQ(stats.last_round->participants, 2u);
    EXPECT_EQ(stats.last_round->malformed_peers, std::vector<uint64_t>{2});
    EXPECT_TRUE(stats.last_round->non_finite_peers.empty());
    EXPECT_EQ(stats.malformed_excluded, 1u);
  }
  expect_identical(t);
  EXPECT_EQ(theta(t[0]), expected_round(start, locals, {true, false, true}));
  // The refused member's residual is put back (zeros: its first round); a counted one's is kept.
  TempDir files;
  std::vector<std::vector<float>> residual(3);
  in_parallel(3, [&](size_t i) {
    ASSERT_TRUE(t[i].engine->save(files.path(i)));
    residual[i] = read_checkpoint(files.path(i))->residual;
  });
  EXPECT_EQ(residual[1], std::vector<float>(kRanges * kPerRange, 0.0f));
  EXPECT_NE(residual[0], std::vector<float>(kRanges * kPerRange, 0.0f));
  // Without the fault its next round counts again.
  t[1].engine->set_encoding_hook({});
  run_until(t, 4);
  for (const auto& tr : t) {
    EXPECT_EQ(tr.engine->stats().last_round->participants, 3u);
    EXPECT_TRUE(tr.engine->stats().last_round->malformed_peers.empty());
  }
  expect_identical(t);
}

// Member 3 dies in the middle of the round of step 4 (its first send there): the survivors retry
// it with freshly encoded pseudo-gradients (each residual put back first) and stay identical.
TEST(EngineFakeSparse, ARoundThatLostAMemberIsRetriedOverTheSurvivors) {
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  start_all(t, sparse_options(2));
  run_until(t, 3);
  world.kill_after_sends(3, 1);
  run_until(t, 6);
  EXPECT_EQ(t[2].status.code(), LH_ERR_PEER_LOST);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(t[i].status) << t[i].status.to_string();
    const auto stats = t[i].engine->stats();
    EXPECT_EQ(stats.rounds_applied, 3u);  // steps 2, 4 (retried), 6
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.last_round->participants, 2u);
  }
  std::vector<Trainer*> survivors{&t[0], &t[1]};
  expect_identical(survivors);
}

TEST(EngineFakeSparse, AJoinerBetweenRoundsAdoptsThetaGAndCountsFromItsFirstWholeRound) {
  FakeWorld world;
  auto t = trainers(world.form(2), {1.0f, 1.0f});
  const auto o = sparse_options(2);
  start_all(t, o);
  run_until(t, 1);
  FakeMember& newcomer = world.add();  // seen pending by the round of step 2
  Trainer joiner(&newcomer, 42.0f, 4.0f);
  std::vector<Trainer*> everyone{&t[0], &t[1], &joiner};
  in_parallel(2, [&](size_t part) {
    if (part == 0) return run_until(t, 4);  // admits at step 4
    ASSERT_TRUE(newcomer.connect());
    ASSERT_TRUE(start(joiner, o)) << joiner.status.to_string();
  });
  EXPECT_EQ(joiner.engine->step_count(), 4u);
  EXPECT_EQ(joiner.flat(), theta(t[0]));
  EXPECT_EQ(t[0].engine->stats().last_round->participants, 2u);  // the joiner's round: nothing
  run_until(everyone, 8);
  for (const Trainer* tr : everyone) ASSERT_TRUE(tr->status) << tr->status.to_string();
  expect_identical(everyone);
  EXPECT_EQ(t[0].engine->stats().last_round->participants, 3u);  // counted from step 6
  EXPECT_EQ(world.ring(), (std::vector<PeerId>{1, 2, 3}));
}

// Every encoding reaches the N − 1 other members exactly once, ring or direct, and the sizes
// (one u64 each) go the same way: summed over the members that is (N − 1) × (the encodings'
// bytes + 8 × N), far below what the f32 all-reduce sends.
TEST(EngineFakeSparse, ARoundSendsEachEncodingToTheOtherMembersOnce) {
  FakeWorld world;
  constexpr size_t kMembers = 4;
  auto t = trainers(world.form(kMembers), {0.0f, 0.0f, 0.0f, 0.0f});
  start_all(t, sparse_options(2));
  run_until(t, 2);
  uint64_t sent = 0, encoded = 0, largest = 0;
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    const auto round = *tr.engine->stats().last_round;
    sent += round.payload_sent;
    encoded += round.encoded_bytes;
    largest = std::max(largest, round.encoded_bytes);
  }
  EXPECT_EQ(sent, (kMembers - 1) * (encoded + 8 * kMembers));
  // Each encoding: the header, and per chunk 4 bytes and 3 entries of 6 bits.
  EXPECT_LE(largest, quant::sparse::kHeaderBytes + 4 * (4 + 3));
  // The f32 ring all-reduce's payload per member: 2 (N − 1) / N of the 256 bytes.
  const uint64_t dense = 2 * (kMembers - 1) * kRanges * kPerRange * sizeof(float) / kMembers;
  EXPECT_LT(sent / kMembers, dense);
}

// Saved at step 8 of Streaming DiLoCo with a round in flight: the files hold each member's
// residual (what its earlier rounds did not send), and a group resumed from them ends on the θ_g
// of the group that went on, bit for bit; a group resumed with the residuals cleared does not.
TEST(EngineFakeSparse, TheResidualIsCarriedAcrossRoundsAndThroughACheckpoint) {
  TempDir files;
  const auto o = sparse_options(4, /*fragments=*/2, /*delay=*/1);
  FakeWorld first;
  auto t = trainers(first.form(3), {1.0f, 2.0f, 3.0f});
  start_all(t, o);
  run_until(t, 8);  // fragment 0's round of step 8 is due at 9
  in_parallel(t.size(), [&](size_t i) { EXPECT_TRUE(t[i].engine->save(files.path(i))); });
  std::vector<std::vector<std::vector<float>>> params;
  for (const auto& tr : t) params.push_back(tr.params);
  for (size_t i = 0; i < t.size(); ++i) {
    auto c = read_checkpoint(files.path(i));
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    ASSERT_EQ(c->residual.size(), kRanges * kPerRange);
    EXPECT_TRUE(std::any_of(c->residual.begin(), c->residual.end(), [](float r) { return r != 0; }))
        << "member " << i << " sent everything: nothing carried";
    EXPECT_TRUE(c->in_flight);
  }
  run_until(t, 16);
  const auto resume = [&](bool clear_residual) {
    FakeWorld second;
    auto resumed = trainers(second.form(3), {0.0f, 0.0f, 0.0f});
    in_parallel(resumed.size(), [&](size_t i) {
      resumed[i].params = params[i];
      auto mine = o;
      mine.resume_path = files.path(i) + (clear_residual ? ".cleared" : "");
      if (clear_residual) {
        auto c = read_checkpoint(files.path(i));
        std::fill(c->residual.begin(), c->residual.end(), 0.0f);
        EXPECT_TRUE(write_checkpoint(mine.resume_path, *c));
      }
      EXPECT_TRUE(start(resumed[i], mine)) << resumed[i].status.to_string();
    });
    run_until(resumed, 16);
    for (const auto& tr : resumed) EXPECT_TRUE(tr.status) << tr.status.to_string();
    expect_identical(resumed);
    return std::vector<uint64_t>{resumed[0].engine->state_hash()};
  };
  EXPECT_EQ(resume(false), std::vector<uint64_t>{t[0].engine->state_hash()});
  EXPECT_NE(resume(true), std::vector<uint64_t>{t[0].engine->state_hash()});
}

// The round of step 4 passes its deadline (member 2's sends to 3 are held): it is dropped
// everywhere, and every member's residual is put back as it was before that round's encoding (its
// pseudo-gradient is still in its parameters, and the next round's carries it).
TEST(EngineFakeSparse, ADroppedRoundPutsTheResidualBack) {
  TempDir files;
  FakeWorld world;
  auto t = trainers(world.form(3), {1.0f, 1.0f, 1.0f});
  auto o = sparse_options(2);
  o.deadline = std::chrono::milliseconds(400);  // far above a round here, even on a busy machine
  start_all(t, o);
  run_until(t, 3);
  const auto residuals = [&](const std::string& tag) {
    std::vector<std::vector<float>> out(t.size());
    in_parallel(t.size(), [&](size_t i) {
      const std::string path = files.path(i) + tag;
      EXPECT_TRUE(t[i].engine->save(path));
      auto c = read_checkpoint(path);
      if (c) out[i] = c->residual;
    });
    return out;
  };
  const auto before = residuals("before");
  world.link(2, 3)->hold_sends([](transport::Tag) { return true; });  // until the epoch ends
  run_until(t, 5);
  EXPECT_EQ(residuals("after"), before);
  run_until(t, 6);
  for (const auto& tr : t) {
    ASSERT_TRUE(tr.status) << tr.status.to_string();
    EXPECT_EQ(tr.engine->stats().rounds_dropped, 1u);
    EXPECT_EQ(tr.engine->stats().rounds_applied, 2u);  // steps 2 and 6
  }
  for (const auto& r : before)
    EXPECT_TRUE(std::any_of(r.begin(), r.end(), [](float x) { return x != 0; }));
  expect_identical(t);
}

TEST(EngineFakeSparse, TheSparseCodecIsRefusedWithTheDelayedMethodsAndADenseCodec) {
  FakeWorld world;
  auto t = trainers(world.form(1), {1.0f});
  auto co2 = options(2, 1, 0, Method::kCo2);
  co2.sparse.enabled = true;
  EXPECT_EQ(start(t[0], co2).code(), LH_ERR_UNSUPPORTED);
  auto both = sparse_options(2);
  both.codec = quant::Codec::kU8;
  EXPECT_EQ(start(t[0], both).code(), LH_ERR_INVALID_ARGUMENT);
  auto no_k = sparse_options(2);
  no_k.sparse.topk_per_chunk = 0;
  EXPECT_EQ(start(t[0], no_k).code(), LH_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace longhaul::sync::testing
