// Corpus building (order, held-out split, excluded directories) and batch reproducibility.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "train/dataset.hpp"

namespace longhaul::train {
namespace {

namespace fs = std::filesystem;

class trainDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    // fmt, not string +: GCC 12 at -O3 warns falsely (-Wrestrict) on the latter.
    dir_ = fs::temp_directory_path() /
           fmt::format("lh_train_data_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(trainDataset, DirectoryIsSortedPythonFilesWithEveryTenthHeldOut) {
  for (int i = 11; i >= 0; --i) {  // created in reverse: the corpus must not care
    write(fs::path("pkg") / fmt::format("f{}.py", 100 + i), std::string(1, char('a' + i)));
  }
  write("notes.txt", "ignored: not python");
  write("site-packages/big.py", "ignored: installed package");
  Result<Corpus> c = build_corpus({dir_.string()});
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_EQ(c->files.size(), 12u);
  EXPECT_TRUE(c->files[0].ends_with("f100.py"));
  EXPECT_TRUE(c->files[11].ends_with("f111.py"));
  EXPECT_EQ(c->val_files, 1u);
  EXPECT_EQ(std::string(c->val.begin(), c->val.end()), "j");  // index 9
  EXPECT_EQ(std::string(c->train.begin(), c->train.end()), "abcdefghikl");
}

TEST_F(trainDataset, SingleFileHoldsOutItsLastTenth) {
  write("a.txt", std::string(90, 'x') + std::string(10, 'y'));
  Result<Corpus> c = build_corpus({(dir_ / "a.txt").string()});
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(std::string(c->val.begin(), c->val.end()), std::string(10, 'y'));
  EXPECT_EQ(c->train.size(), 90u);
}

TEST_F(trainDataset, MissingPathIsAnError) {
  Result<Corpus> c = build_corpus({(dir_ / "nope").string()});
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), LH_ERR_IO);
}

TEST(trainBatches, AreReproducibleIndependentOfOrderAndShiftedByOne) {
  std::vector<std::uint8_t> text(5000);
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::uint8_t>(i * 7 % 251);
  Result<Batch> b3 = train_batch(text, 4, 16, 9, 3);
  Result<Batch> b3_again = train_batch(text, 4, 16, 9, 3);
  Result<Batch> b4 = train_batch(text, 4, 16, 9, 4);
  Result<Batch> other_seed = train_batch(text, 4, 16, 10, 3);
  ASSERT_TRUE(b3.is_ok() && b3_again.is_ok() && b4.is_ok() && other_seed.is_ok());
  EXPECT_EQ(b3->inputs, b3_again->inputs);
  EXPECT_NE(b3->inputs, b4->inputs);
  EXPECT_NE(b3->inputs, other_seed->inputs);
  for (int b = 0; b < 4; ++b) {
    for (int t = 0; t + 1 < 16; ++t) EXPECT_EQ(b3->targets[b * 16 + t], b3->inputs[b * 16 + t + 1]);
  }
  EXPECT_FALSE(train_batch(std::vector<std::uint8_t>(16), 1, 16, 0, 0).is_ok());  // too short
}

TEST(trainBatches, ValidationWindowsSpanTheSplit) {
  std::vector<std::uint8_t> text(1000);
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::uint8_t>(i % 256);
  Result<Batch> first = val_batch(text, 2, 8, 0, 3);
  Result<Batch> last = val_batch(text, 2, 8, 2, 3);
  ASSERT_TRUE(first.is_ok() && last.is_ok());
  EXPECT_EQ(first->inputs[0], 0);                                // first window at offset 0
  EXPECT_EQ(last->targets.back(), static_cast<int>(999 % 256));  // last ends at the last byte
  EXPECT_FALSE(val_batch(text, 2, 8, 3, 3).is_ok());
}

TEST(trainUnigram, EntropyOfTwoEqualSymbolsIsLogTwo) {
  std::vector<std::uint8_t> text;
  for (int i = 0; i < 100000; ++i) text.push_back(i % 2 ? 'a' : 'b');
  EXPECT_NEAR(unigram_cross_entropy(text, text), std::log(2.0), 1e-2);
}

}  // namespace
}  // namespace longhaul::train
