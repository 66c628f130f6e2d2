// The Prometheus text encoder: the format's rules, and promtool's verdict on what it writes.
#include "common/metrics_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "promtool.hpp"

namespace longhaul {
namespace {

using Type = MetricsText::Type;

TEST(MetricsTextTest, WritesHelpTypeAndLabelledSamples) {
  MetricsText m;
  ASSERT_TRUE(m.family("lh_things_total", Type::kCounter, "Things seen.").is_ok());
  ASSERT_TRUE(m.sample(3, {{"kind", "a"}, {"peer", "7"}}).is_ok());
  ASSERT_TRUE(m.sample(0.25, {{"kind", "b"}, {"peer", "7"}}).is_ok());
  ASSERT_TRUE(m.family("lh_level", Type::kGauge, "A level.").is_ok());
  ASSERT_TRUE(m.sample(-2).is_ok());
  EXPECT_EQ(m.text(),
            "# HELP lh_things_total Things seen.\n"
            "# TYPE lh_things_total counter\n"
            "lh_things_total{kind=\"a\",peer=\"7\"} 3\n"
            "lh_things_total{kind=\"b\",peer=\"7\"} 0.25\n"
            "# HELP lh_level A level.\n"
            "# TYPE lh_level gauge\n"
            "lh_level -2\n");
  EXPECT_TRUE(testing::promtool_accepts(m.text()));
}

TEST(MetricsTextTest, EscapesLabelValuesAndHelpText) {
  MetricsText m;
  ASSERT_TRUE(m.family("lh_reasons", Type::kGauge, "Back\\slash and\nnewline.").is_ok());
  ASSERT_TRUE(m.sample(1, {{"reason", "say \"hi\"\\\nbye"}}).is_ok());
  EXPECT_EQ(m.text(),
            "# HELP lh_reasons Back\\\\slash and\\nnewline.\n"
            "# TYPE lh_reasons gauge\n"
            "lh_reasons{reason=\"say \\\"hi\\\"\\\\\\nbye\"} 1\n");
  EXPECT_TRUE(testing::promtool_accepts(m.text()));
}

TEST(MetricsTextTest, WritesSpecialValuesAsTheFormatSpellsThem) {
  MetricsText m;
  ASSERT_TRUE(m.family("lh_odd", Type::kGauge, "Odd values.").is_ok());
  ASSERT_TRUE(m.sample(std::numeric_limits<double>::quiet_NaN(), {{"v", "nan"}}).is_ok());
  ASSERT_TRUE(m.sample(std::numeric_limits<double>::infinity(), {{"v", "inf"}}).is_ok());
  ASSERT_TRUE(m.sample(-std::numeric_limits<double>::infinity(), {{"v", "-inf"}}).is_ok());
  ASSERT_TRUE(m.sample(1e20, {{"v", "big"}}).is_ok());
  EXPECT_NE(m.text().find("lh_odd{v=\"nan\"} NaN\n"), std::string::npos) << m.text();
  EXPECT_NE(m.text().find("lh_odd{v=\"inf\"} +Inf\n"), std::string::npos);
  EXPECT_NE(m.text().find("lh_odd{v=\"-inf\"} -Inf\n"), std::string::npos);
  EXPECT_NE(m.text().find("lh_odd{v=\"big\"} 1e+20\n"), std::string::npos);
  EXPECT_TRUE(testing::promtool_accepts(m.text()));
}

TEST(MetricsTextTest, RefusesWhatTheFormatForbidsAndWritesNothingForIt) {
  MetricsText m;
  EXPECT_FALSE(m.sample(1).is_ok()) << "a sample before any family";
  EXPECT_FALSE(m.family("1abc", Type::kGauge, "").is_ok());
  EXPECT_FALSE(m.family("a-b", Type::kGauge, "").is_ok());
  EXPECT_FALSE(m.family("", Type::kGauge, "").is_ok());
  ASSERT_TRUE(m.family("lh_ok:sub", Type::kGauge, "Colons are allowed in names.").is_ok());
  EXPECT_FALSE(m.family("lh_ok:sub", Type::kGauge, "").is_ok()) << "a family twice";
  EXPECT_FALSE(m.sample(1, {{"__reserved", "x"}}).is_ok());
  EXPECT_FALSE(m.sample(1, {{"a:b", "x"}}).is_ok()) << "no colons in label names";
  EXPECT_FALSE(m.sample(1, {{"a", "x"}, {"a", "y"}}).is_ok()) << "a label twice";
  EXPECT_EQ(m.text(), "# HELP lh_ok:sub Colons are allowed in names.\n# TYPE lh_ok:sub gauge\n");
}

TEST(MetricsTextTest, PromtoolCatchesALintProblemSoItsVerdictMeansSomething) {
  // A counter without the _total suffix is a lint problem for promtool: if this passed, the
  // checks above would prove nothing.
  MetricsText m;
  ASSERT_TRUE(m.family("lh_things", Type::kCounter, "Things.").is_ok());
  ASSERT_TRUE(m.sample(1).is_ok());
  EXPECT_FALSE(testing::promtool_accepts(m.text()));
}

}  // namespace
}  // namespace longhaul
