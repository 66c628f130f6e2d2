// The engine checkpoint's file: every field comes back as written, with a round in flight and
// without one (the delayed methods' staged Δ lives in the staging buffer either way), and a file
// that is not a checkpoint, or was truncated or altered, is refused with the reason.
#include "sync/checkpoint.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <unistd.h>

namespace longhaul::sync {
namespace {

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lh-sync-checkpoint-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path() const { return (dir_ / "engine.bin").string(); }

  static EngineCheckpoint sample(bool in_flight) {
    EngineCheckpoint c;
    c.config = "diloco H=20 F=2";
    c.counters = {40, 2, 1};
    c.overlap = {3, 2, 4};
    c.theta_g = {{1.0f, 2.0f}, {3.0f}};
    c.momentum = {{0.5f, -0.5f}, {0.25f}};
    c.last_reset = {40, 30};
    c.eager_state = {0.125f, 0.0f};
    c.staged_code = 1;
    c.staged_finite = false;
    c.staging = {7.0f, -7.0f};
    c.residual = {0.5f, -1e-30f, 3.0f};
    if (in_flight) {
      c.in_flight = true;
      c.fragment = 1;
      c.number = 3;
      c.attempts = 2;
      c.late = true;
      c.applied = true;
      c.masks = {1.0f, 0.0f, 5.0f, 0.0f};
      c.ring = {4, 9};
    }
    return c;
  }

  static void expect_equal(const EngineCheckpoint& a, const EngineCheckpoint& b) {
    EXPECT_EQ(a.config, b.config);
    EXPECT_EQ(a.counters, b.counters);
    EXPECT_EQ(a.overlap, b.overlap);
    EXPECT_EQ(a.residual, b.residual);
    EXPECT_EQ(a.theta_g, b.theta_g);
    EXPECT_EQ(a.momentum, b.momentum);
    EXPECT_EQ(a.last_reset, b.last_reset);
    EXPECT_EQ(a.eager_state, b.eager_state);
    EXPECT_EQ(a.staged_code, b.staged_code);
    EXPECT_EQ(a.staged_finite, b.staged_finite);
    EXPECT_EQ(a.staging, b.staging);
    EXPECT_EQ(a.in_flight, b.in_flight);
    EXPECT_EQ(a.fragment, b.fragment);
    EXPECT_EQ(a.number, b.number);
    EXPECT_EQ(a.attempts, b.attempts);
    EXPECT_EQ(a.late, b.late);
    EXPECT_EQ(a.applied, b.applied);
    EXPECT_EQ(a.masks, b.masks);
    EXPECT_EQ(a.ring, b.ring);
  }

  std::filesystem::path dir_;
};

TEST_F(CheckpointFileTest, EveryFieldComesBackWithoutARoundInFlight) {
  const EngineCheckpoint c = sample(false);
  ASSERT_TRUE(write_checkpoint(path(), c).is_ok());
  auto back = read_checkpoint(path());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_equal(*back, c);
}

TEST_F(CheckpointFileTest, EveryFieldComesBackWithARoundInFlight) {
  const EngineCheckpoint c = sample(true);
  ASSERT_TRUE(write_checkpoint(path(), c).is_ok());
  auto back = read_checkpoint(path());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_equal(*back, c);
}

TEST_F(CheckpointFileTest, AMissingTruncatedOrAlteredFileIsRefusedWithTheReason) {
  auto missing = read_checkpoint(path());
  EXPECT_EQ(missing.status().code(), LH_ERR_IO);
  ASSERT_TRUE(write_checkpoint(path(), sample(true)).is_ok());
  const auto size = std::filesystem::file_size(path());
  {
    std::fstream f(path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.put('\x5a');
  }
  auto altered = read_checkpoint(path());
  EXPECT_EQ(altered.status().code(), LH_ERR_PROTOCOL);
  EXPECT_NE(altered.status().message().find("checksum"), std::string::npos);
  std::filesystem::resize_file(path(), 5);
  auto truncated = read_checkpoint(path());
  EXPECT_EQ(truncated.status().code(), LH_ERR_PROTOCOL);
  EXPECT_NE(truncated.status().message().find("header"), std::string::npos);
}

// A file of version 3 (before τ could change) is the version 5 layout without the overlap's and
// the residual's vectors, right before the in-flight flag: it reads back with an empty overlap,
// which the engine takes as the configured τ, and no residual (no sparse codec then).
TEST_F(CheckpointFileTest, AVersion3FileReadsWithoutTheOverlapAndTheResidual) {
  EngineCheckpoint c = sample(false);
  c.overlap.clear();
  c.residual.clear();
  ASSERT_TRUE(write_checkpoint(path(), c).is_ok());
  std::vector<char> bytes;
  {
    std::ifstream in(path(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  constexpr size_t kSum = sizeof(uint64_t), kFlag = 1, kCount = sizeof(uint64_t);
  ASSERT_GT(bytes.size(), 8 + 4 + 2 * kCount + kFlag + kSum);
  bytes.resize(bytes.size() - kSum);
  const auto counts_at = static_cast<std::ptrdiff_t>(bytes.size() - kFlag - 2 * kCount);
  bytes.erase(bytes.begin() + counts_at, bytes.begin() + counts_at + 2 * kCount);
  const uint32_t version = 3;
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  const uint64_t sum = XXH64(bytes.data(), bytes.size(), 0);
  const auto* p = reinterpret_cast<const char*>(&sum);
  bytes.insert(bytes.end(), p, p + sizeof sum);
  {
    std::ofstream out(path(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto back = read_checkpoint(path());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_equal(*back, c);
  EXPECT_TRUE(back->overlap.empty());
  EXPECT_TRUE(back->residual.empty());
}

}  // namespace
}  // namespace longhaul::sync
