// The JSON and /metrics views of a RunStatus: the figures they carry are the recorder's, promtool
// accepts the metrics, and no output carries a secret.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "master/run_recorder.hpp"
#include "master/status_render.hpp"
#include "master_fixture.hpp"
#include "promtool.hpp"

namespace longhaul::master {
namespace {

class StatusMetricsTest : public MasterFixture {
 protected:
  RunStatus run() {
    RunRecorder rec(100.0);
    const auto ids = form(3);
    const PeerId joiner = join(1);
    rec.joined(joiner, 1, 101);
    rec.aborted(0, m.epoch(), "peer 9 lost: \"connection reset\"\nby peer", 102);
    for (size_t i = 0; i < ids.size(); ++i) {
      wire::PeerStatsMsg s;
      s.epoch = m.epoch();
      s.data_sent = 1000 * (i + 1);
      s.has_state = true;
      s.state_revision = 3;
      s.state_digest = i == 2 ? 0xFEEDFACECAFEBEEFULL : 0x0123456789ABCDEFULL;
      s.has_engine = true;
      s.inner_steps = 40;
      s.outer_rounds = 2;
      s.last_round_participants = 3;
      s.blocked_ns = 1'500'000'000;
      s.delay = 2;
      s.delay_needed = static_cast<uint32_t>(i + 1);  // peer 3 needs more than τ
      s.delay_changes = 4;
      s.sync_time_ns = 250'000'000 * (i + 1);
      s.step_time_ns = 125'000'000;
      s.links = {{ids[(i + 1) % 3], 2, 250, 1u << 24, 4096, 2048, 1}};
      rec.stats(ids[i], s, 103);
    }
    return rec.build(
        m, [](uint32_t g) { return g == 0 ? std::optional<uint64_t>(3) : std::nullopt; }, 4, 104);
  }
};

TEST_F(StatusMetricsTest, PromtoolAcceptsTheMastersMetrics) {
  const std::string text = status_metrics(run());
  ASSERT_FALSE(text.empty());
  EXPECT_TRUE(testing::promtool_accepts(text));
  EXPECT_NE(text.find("longhaul_master_epoch " + std::to_string(m.epoch()) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("longhaul_group_state_mismatches{group=\"0\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("longhaul_link_rtt_seconds{from=\"1\",to=\"2\"} 0.00025\n"),
            std::string::npos);
  EXPECT_NE(text.find("longhaul_peer_engine_blocked_seconds_total{peer=\"1\",group=\"0\","
                      "node=\"127.0.0.1\"} 1.5\n"),
            std::string::npos);
}

TEST_F(StatusMetricsTest, TheMetricsShowEachMembersOverlap) {
  const std::string text = status_metrics(run());
  auto has = [&text](const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  };
  const std::string peer3 = "{peer=\"3\",group=\"0\",node=\"127.0.0.1\"}";
  EXPECT_TRUE(has("longhaul_peer_engine_delay_steps" + peer3 + " 2")) << text;
  EXPECT_TRUE(has("longhaul_peer_engine_delay_needed_steps" + peer3 + " 3"));
  EXPECT_TRUE(has("longhaul_peer_engine_delay_changes_total" + peer3 + " 4"));
  EXPECT_TRUE(has("longhaul_peer_engine_sync_seconds" + peer3 + " 0.75"));
  EXPECT_TRUE(has("longhaul_peer_engine_step_seconds" + peer3 + " 0.125"));
  EXPECT_TRUE(has("longhaul_run_engine_delay_steps 2"));
  EXPECT_NE(text.find("# TYPE longhaul_peer_engine_delay_changes_total counter"),
            std::string::npos);
  EXPECT_EQ(text.find("longhaul_peer_engine_delay_steps{peer=\"4\""), std::string::npos)
      << "the joiner runs no engine";
}

TEST_F(StatusMetricsTest, TheJsonCarriesEachMembersOverlap) {
  const auto j = nlohmann::json::parse(status_json(run()));
  EXPECT_EQ(j["engine"]["delay"], 2);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const auto& e = j["peers"][i]["stats"]["engine"];
    EXPECT_EQ(e["delay"], 2);
    EXPECT_EQ(e["delay_needed"], i + 1);
    EXPECT_EQ(e["delay_changes"], 4);
    EXPECT_DOUBLE_EQ(e["sync_time_s"].get<double>(), 0.25 * static_cast<double>(i + 1));
    EXPECT_DOUBLE_EQ(e["step_time_s"].get<double>(), 0.125);
  }
  EXPECT_TRUE(j["peers"][3]["stats"].is_null()) << "the joiner has not reported";
}

TEST_F(StatusMetricsTest, TheJsonCarriesTheRunAsRecorded) {
  const auto j = nlohmann::json::parse(status_json(run()));
  EXPECT_EQ(j["epoch"], m.epoch());
  EXPECT_EQ(j["node_identity"], "node name; host for a peer without a node");
  ASSERT_EQ(j["peers"].size(), 4u);
  EXPECT_EQ(j["peers"][3]["state"], "pending");
  EXPECT_EQ(j["peers"][2]["stats"]["state"]["hash"], "feedfacecafebeef");
  EXPECT_TRUE(j["peers"][2]["stats"]["state"]["mismatch"].get<bool>());
  EXPECT_FALSE(j["peers"][0]["stats"]["state"]["mismatch"].get<bool>());
  EXPECT_EQ(j["peers"][0]["stats"]["engine"]["outer_rounds"], 2);
  EXPECT_EQ(j["links"].size(), 3u);
  EXPECT_EQ(j["groups"][0]["state_revision"], 3);
  EXPECT_TRUE(j["groups"][1]["state_revision"].is_null());
  EXPECT_EQ(j["bytes"]["data_sent"], 6000);
  const auto abort = std::find_if(j["events"].begin(), j["events"].end(),
                                  [](const auto& e) { return e["kind"] == "abort"; });
  ASSERT_NE(abort, j["events"].end());
  EXPECT_EQ(j["events"].back()["kind"], "epoch") << "the build saw the epoch change";
  EXPECT_EQ((*abort)["reason"], "peer 9 lost: \"connection reset\"\nby peer");
}

TEST_F(StatusMetricsTest, ThePageIsOneSelfContainedDocument) {
  const std::string& page = status_page_html();
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page.find("/api/status"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos) << "no external resource";
  EXPECT_EQ(page.find("https://"), std::string::npos) << "no external resource";
}

// The page draws its engine table from the JSON: every figure the JSON gives a member's engine is
// read by the page (a renamed key would leave a column of "undefined"), under its heading.
TEST_F(StatusMetricsTest, ThePageShowsEveryEngineFigureTheJsonCarries) {
  const std::string& page = status_page_html();
  const auto j = nlohmann::json::parse(status_json(run()));
  const auto& engine = j["peers"][0]["stats"]["engine"];
  ASSERT_TRUE(engine.contains("delay_needed"));
  for (const auto& [key, value] : engine.items())
    EXPECT_NE(page.find("e." + key), std::string::npos) << key;
  EXPECT_NE(page.find("s.engine.delay"), std::string::npos);
  for (const char* heading :
       {"\"τ\"", "\"τ needed\"", "\"τ changes\"", "\"sync time\"", "\"step time\""})
    EXPECT_NE(page.find(heading), std::string::npos) << heading;
}

}  // namespace
}  // namespace longhaul::master
