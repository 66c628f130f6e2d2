// Structured logs: the JSON-lines format is one valid JSON object per line with the documented
// fields, whatever bytes the message holds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/log.hpp"

namespace longhaul::log {
namespace {

class LogFormatTest : public ::testing::Test {
 protected:
  void TearDown() override { set_format(Format::kText); }
};

TEST_F(LogFormatTest, JsonLinesCarryTimeLevelComponentPidAndMessage) {
  set_format(Format::kJson);
  const std::string line = format_line(Level::kWarn, "master", "peer 3 left: \"bye\"\nnext");
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line";
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["component"], "master");
  EXPECT_EQ(j["msg"], "peer 3 left: \"bye\"\nnext");
  EXPECT_GT(j["pid"].get<int>(), 0);
  EXPECT_EQ(j["ts"].get<std::string>().size(), 24u) << j["ts"];  // 2024-01-02T03:04:05.678Z
}

TEST_F(LogFormatTest, InvalidUtf8InAMessageStillMakesValidJson) {
  set_format(Format::kJson);
  const std::string line = format_line(Level::kInfo, "peer", std::string("bad \xff\xfe bytes"));
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << line;
  EXPECT_EQ(j["msg"].get<std::string>().rfind("bad ", 0), 0u);
}

TEST_F(LogFormatTest, TextStaysTheDefaultFormat) {
  EXPECT_EQ(format(), Format::kText);
  const std::string line = format_line(Level::kInfo, "master", "hello");
  EXPECT_NE(line.find("INFO [master] hello\n"), std::string::npos) << line;
  Format f;
  EXPECT_TRUE(parse_format("json", &f));
  EXPECT_EQ(f, Format::kJson);
  EXPECT_FALSE(parse_format("yaml", &f));
}

}  // namespace
}  // namespace longhaul::log
