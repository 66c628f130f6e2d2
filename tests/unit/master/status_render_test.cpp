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

}  // namespace
}  // namespace longhaul::master
