// Checkpoints: a resumed run reproduces the uninterrupted one bit for bit; damaged or mismatched
// files are refused without touching the trainer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace longhaul::train {
namespace {

namespace fs = std::filesystem;

TrainOptions small_options() {
  TrainOptions o;
  o.model = GptConfig{256, 16, 2, 32, 4};
  o.batch = 3;
  o.schedule = LrSchedule{2e-3f, 2e-4f, 2, 8};
  return o;
}

std::vector<std::uint8_t> text() {
  std::vector<std::uint8_t> t(4000);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<std::uint8_t>("hello, world\n"[i % 13]);
  return t;
}

std::string temp_path(const char* name) {
  return (fs::temp_directory_path() / (std::string("lh_train_ckpt_") + name)).string();
}

template <class A, class B>
bool bitwise_equal(const A& a, const B& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof(float)) == 0;
         });
}

TEST(trainCheckpoint, ResumingReproducesTheUninterruptedRunBitForBit) {
  const std::vector<std::uint8_t> data = text();
  Result<Trainer> straight = Trainer::create(small_options());
  ASSERT_TRUE(straight.is_ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(straight->step(data).is_ok());

  const std::string path = temp_path("resume");
  {
    Result<Trainer> first_half = Trainer::create(small_options());
    ASSERT_TRUE(first_half.is_ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(first_half->step(data).is_ok());
    ASSERT_TRUE(save_checkpoint(path, *first_half).is_ok());
  }
  TrainOptions other_init = small_options();
  other_init.init_seed = 999;  // the checkpoint, not the seed, must decide the parameters
  Result<Trainer> resumed = Trainer::create(other_init);
  ASSERT_TRUE(resumed.is_ok());
  Status loaded = load_checkpoint(path, *resumed);
  ASSERT_TRUE(loaded.is_ok()) << loaded.to_string();
  EXPECT_EQ(resumed->step_count(), 3);
  EXPECT_EQ(resumed->data_index(), 3u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(resumed->step(data).is_ok());

  EXPECT_EQ(resumed->step_count(), straight->step_count());
  EXPECT_TRUE(bitwise_equal(resumed->model().params(), straight->model().params()));
  EXPECT_TRUE(bitwise_equal(resumed->optimizer().m(), straight->optimizer().m()));
  EXPECT_TRUE(bitwise_equal(resumed->optimizer().v(), straight->optimizer().v()));
  fs::remove(path);
}

TEST(trainCheckpoint, DamagedOrMismatchedFilesAreRefused) {
  Result<Trainer> trainer = Trainer::create(small_options());
  ASSERT_TRUE(trainer.is_ok());
  const std::string path = temp_path("damaged");
  ASSERT_TRUE(save_checkpoint(path, *trainer).is_ok());
  const std::vector<float> before(trainer->model().params().begin(),
                                  trainer->model().params().end());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  Result<Trainer> victim = Trainer::create(small_options());
  ASSERT_TRUE(victim.is_ok());
  ASSERT_TRUE(victim->step(text()).is_ok());
  const std::vector<float> victim_before(victim->model().params().begin(),
                                         victim->model().params().end());
  Status s = load_checkpoint(path, *victim);
  EXPECT_EQ(s.code(), LH_ERR_IO) << s.to_string();
  EXPECT_TRUE(bitwise_equal(victim->model().params(), victim_before));
  EXPECT_EQ(victim->step_count(), 1);

  TrainOptions bigger = small_options();
  bigger.model.layers = 3;
  ASSERT_TRUE(save_checkpoint(path, *trainer).is_ok());
  Result<Trainer> other = Trainer::create(bigger);
  ASSERT_TRUE(other.is_ok());
  EXPECT_EQ(load_checkpoint(path, *other).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(load_checkpoint(temp_path("missing"), *other).code(), LH_ERR_IO);
  fs::remove(path);
}

}  // namespace
}  // namespace longhaul::train
