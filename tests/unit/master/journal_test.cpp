// The master's journal (journal.hpp): ceilings survive a reopen, leases are reserved ahead, and a
// corrupt or truncated file is reported and replaced, never fatal.
#include "master/journal.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "process.hpp"

namespace longhaul::master {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(Journal, AFirstStartCreatesItAndARestartReadsTheCeilings) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/journal";
  Journal::Found found;
  auto j = Journal::open(path, &found);
  ASSERT_TRUE(j.is_ok()) << j.status().to_string();
  EXPECT_FALSE(found.existed);
  ASSERT_TRUE((*j)->cover(5, 2).is_ok());
  EXPECT_EQ((*j)->ceilings().last_id, 5 + Journal::kLease);
  EXPECT_EQ((*j)->ceilings().last_epoch, 2 + Journal::kLease);
  const std::string first = read(path);
  ASSERT_TRUE((*j)->cover(6, 3).is_ok());
  EXPECT_EQ(read(path), first) << "inside the lease nothing is written";
  j->reset();

  auto again = Journal::open(path, &found);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(found.existed);
  EXPECT_TRUE(found.corrupt.empty()) << found.corrupt;
  EXPECT_EQ(found.ceilings.last_id, 5 + Journal::kLease);
  EXPECT_EQ(found.ceilings.last_epoch, 2 + Journal::kLease);
}

TEST(Journal, CorruptOrTruncatedFilesAreReportedAndReplaced) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/journal";
  const std::string good = Journal::format({40, 9});
  std::string flipped = good;
  flipped[good.find("40")] = '7';
  for (const std::string& bad :
       {std::string(), good.substr(0, good.size() / 2), good.substr(0, good.size() - 1), flipped,
        std::string("\x00\xff garbage\n", 11), std::string(10000, 'x')}) {
    write(path, bad);
    Journal::Found found;
    auto j = Journal::open(path, &found);
    ASSERT_TRUE(j.is_ok()) << j.status().to_string();
    EXPECT_TRUE(found.existed);
    EXPECT_FALSE(found.corrupt.empty()) << "accepted: " << bad;
    EXPECT_TRUE(Journal::parse(read(path)).is_ok()) << "rewritten in a valid form";
  }
}

TEST(Journal, ParseRejectsFieldsOutOfShape) {
  EXPECT_TRUE(Journal::parse(Journal::format({1, 2})).is_ok());
  for (const char* text :
       {"longhaul-master-journal 1 last_id=1 check=0000000000000000\n",
        "longhaul-master-journal 2 last_id=1 last_epoch=2 check=00\n", "nonsense\n"})
    EXPECT_FALSE(Journal::parse(text).is_ok()) << text;
}

TEST(Journal, AnUnwritablePlaceIsAnError) {
  Journal::Found found;
  auto j = Journal::open("/proc/no-such-dir/journal", &found);
  ASSERT_FALSE(j.is_ok());
  EXPECT_EQ(j.status().code(), LH_ERR_IO);
}

}  // namespace
}  // namespace longhaul::master
