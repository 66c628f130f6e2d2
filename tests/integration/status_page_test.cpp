// The master's status page, JSON and /metrics against a live run (issue 28): longhaul-train peers
// training with DiLoCo through a real master daemon, with churn (a joiner, a graceful leave, a
// SIGKILL). The JSON is checked against the master's own log, the metrics with promtool and
// against the JSON, and the page is loaded in headless Chromium, which must draw a row per member
// and the throughput plot. A second test holds slow HTTP clients against the master while peers
// join, and reads the master's JSON-lines log.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "cluster.hpp"
#include "promtool.hpp"
#include "status_support.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

const std::vector<std::string> kSmallModel = {
    "--layers",  "2", "--channels", "32", "--heads", "2",    "--context",     "32", "--batch", "4",
    "--threads", "1", "--warmup",   "10", "--lr",    "5e-3", "--val-batches", "2"};

// Waits (polling the JSON) until `done` holds; the last JSON seen either way.
Json wait_status(uint16_t port, const std::function<bool(const Json&)>& done,
                 std::chrono::seconds timeout, bool* met) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Json last;
  *met = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto j = status_json(port)) {
      last = *j;
      if (done(last)) {
        *met = true;
        break;
      }
    }
    std::this_thread::sleep_for(200ms);
  }
  return last;
}

size_t count_state(const Json& s, const std::string& state) {
  size_t n = 0;
  for (const auto& p : s["peers"])
    n += p["state"] == state || (state == "member" && p["state"] != "pending");
  return n;
}

size_t count_events(const Json& s, const std::string& kind) {
  return s["event_totals"].contains(kind) ? s["event_totals"][kind].get<size_t>() : 0;
}

// The master's last "epoch E: N peers" log line, as (E, N).
std::optional<std::pair<uint64_t, uint64_t>> logged_epoch(const std::string& log) {
  static const std::regex line(R"(epoch (\d+): (\d+) peers)");
  std::optional<std::pair<uint64_t, uint64_t>> last;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it)
    last = {std::stoull((*it)[1]), std::stoull((*it)[2])};
  return last;
}

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(3);
    const char* words[] = {"the cat", "a dog", "sees", "likes", "the moon", "some bread"};
    std::ofstream out(corpus_);
    for (int i = 0; i < 3000; ++i)
      out << words[rng() % 2] << ' ' << words[2 + rng() % 2] << ' ' << words[4 + rng() % 2]
          << ".\n";
    const int port = read_port_file(files_.path() + "/status.port", 30s);
    ASSERT_GT(port, 0) << cluster_.master().stderr_text();
    status_port_ = static_cast<uint16_t>(port);
  }

  Child& trainer(const std::string& name, std::vector<std::string> args) {
    std::vector<std::string> argv = {LONGHAUL_TRAIN_BIN,
                                     "--master",
                                     cluster_.master_address(),
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--data",
                                     corpus_,
                                     "--out",
                                     cluster_.dir().path() + "/" + name,
                                     "--json",
                                     "--no-plot",
                                     "--steps",
                                     "1000000",
                                     "--sync-every",
                                     "10"};
    argv.insert(argv.end(), kSmallModel.begin(), kSmallModel.end());
    argv.insert(argv.end(), args.begin(), args.end());
    peers_.push_back(std::make_unique<Child>(argv, cluster_.dir().path() + "/" + name + ".log"));
    return *peers_.back();
  }

  // Declared before the cluster: the master writes its status port here.
  TempDir files_;
  Cluster cluster_{{"--status-listen", "127.0.0.1:0", "--status-port-file",
                    files_.path() + "/status.port", "--heartbeat-interval-ms", "250",
                    "--log-format", "json"}};
  const std::string corpus_ = cluster_.dir().path() + "/corpus.txt";
  uint16_t status_port_ = 0;
  std::vector<std::unique_ptr<Child>> peers_;
};

// Every active trainer reports engine progress and its overlap, links with a measured RTT, and
// the same state.
void expect_live_figures(const Json& s) {
  bool timed = false;  // some trainer timed its steps and its syncs (a joiner may not have yet)
  for (const auto& p : s["peers"]) {
    if (p["state"] == "pending") continue;
    SCOPED_TRACE("peer " + p["id"].dump());
    ASSERT_FALSE(p["stats"].is_null());
    const auto& st = p["stats"];
    ASSERT_FALSE(st["engine"].is_null());
    EXPECT_GT(st["engine"]["inner_steps"].get<uint64_t>(), 0u);
    for (const char* key : {"delay", "delay_needed", "delay_changes", "sync_time_s", "step_time_s"})
      EXPECT_TRUE(st["engine"][key].is_number()) << key;
    timed |= st["engine"]["step_time_s"].get<double>() > 0 &&
             st["engine"]["sync_time_s"].get<double>() > 0;
    EXPECT_GT(st["bytes"]["data_sent"].get<uint64_t>(), 0u);
    ASSERT_FALSE(st["state"].is_null()) << "the engine's state sync reports revision and hash";
    EXPECT_FALSE(st["state"]["mismatch"].get<bool>());
  }
  EXPECT_TRUE(timed) << "no trainer reports its sync and step time";
  std::set<uint64_t> with_links;
  for (const auto& l : s["links"]) {
    EXPECT_GT(l["rtt_us"].get<uint64_t>(), 0u);
    EXPECT_GE(l["connections"].get<uint64_t>(), 1u);
    with_links.insert(l["from"].get<uint64_t>());
  }
  EXPECT_EQ(with_links.size(), count_state(s, "member")) << s["links"].dump();
}

// The metrics agree with the JSON published at the same time (retried across a publication).
void expect_metrics_match(uint16_t port) {
  for (int attempt = 0;; ++attempt) {
    auto before = status_json(port);
    auto text = http_get(port, "/metrics");
    auto after = status_json(port);
    ASSERT_TRUE(before && text && after);
    if ((*before)["epoch"] != (*after)["epoch"] ||
        (*before)["peers"].size() != (*after)["peers"].size()) {
      ASSERT_LT(attempt, 10) << "the run never held still";
      continue;
    }
    EXPECT_TRUE(promtool_accepts(*text));
    EXPECT_NE(text->find("\nlonghaul_master_epoch " + (*after)["epoch"].dump() + "\n"),
              std::string::npos)
        << *text;
    size_t infos = 0;
    for (size_t at = 0; (at = text->find("\nlonghaul_peer_info{", at)) != std::string::npos; ++at)
      ++infos;
    EXPECT_EQ(infos, (*after)["peers"].size());
    EXPECT_NE(text->find("\nlonghaul_link_rtt_seconds{"), std::string::npos);
    return;
  }
}

TEST_F(StatusPageTest, ALiveRunWithChurnShowsInJsonMetricsAndHeadlessChromium) {
  std::vector<Child*> group;
  for (int i = 0; i < 3; ++i)
    group.push_back(
        &trainer("t" + std::to_string(i), {"--peers", "3", "--peer-index", std::to_string(i)}));
  bool met = false;
  Json s = wait_status(
      status_port_,
      [](const Json& j) {
        size_t reporting = 0;
        for (const auto& p : j["peers"])
          reporting += !p["stats"].is_null() && !p["stats"]["engine"].is_null() &&
                       p["stats"]["engine"]["outer_rounds"].get<uint64_t>() > 0;
        return reporting == 3;
      },
      120s, &met);
  ASSERT_TRUE(met) << s.dump(1) << cluster_.master().stderr_text();
  // Churn: a joiner, a graceful leave (SIGTERM), a SIGKILL.
  trainer("joiner", {"--peers", "3", "--peer-index", "1", "--join"});
  s = wait_status(
      status_port_, [](const Json& j) { return count_state(j, "member") == 4; }, 120s, &met);
  ASSERT_TRUE(met) << s.dump(1);
  group[2]->kill(SIGTERM);
  s = wait_status(
      status_port_, [](const Json& j) { return count_events(j, "leave") == 1; }, 120s, &met);
  ASSERT_TRUE(met) << s.dump(1);
  group[1]->kill(SIGKILL);
  s = wait_status(
      status_port_,
      [](const Json& j) {
        return count_events(j, "lost") == 1 && count_state(j, "member") == 2 &&
               j["throughput"].size() >= 10 && !j["round_in_progress"].get<bool>();
      },
      120s, &met);
  ASSERT_TRUE(met) << s.dump(1);

  // The JSON against the master's own account of the run (its log), once both have settled.
  for (int i = 0; i < 50; ++i) {
    s = *status_json(status_port_);
    auto logged = logged_epoch(cluster_.master().stderr_text());
    if (logged && logged->first == s["epoch"].get<uint64_t>()) {
      EXPECT_EQ(logged->second, count_state(s, "member"));
      break;
    }
    ASSERT_LT(i, 49) << "the JSON's epoch never matched the master's log";
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(count_events(s, "join"), 4u);
  bool lost_reason = false, leave_reason = false;
  for (const auto& e : s["events"]) {
    if (e["kind"] == "lost") lost_reason = !e["reason"].get<std::string>().empty();
    if (e["kind"] == "leave")
      leave_reason = e["reason"].get<std::string>().find("left gracefully") != std::string::npos;
  }
  EXPECT_TRUE(lost_reason && leave_reason) << s["events"].dump(1);
  EXPECT_GE(count_events(s, "abort"), 1u) << "the SIGKILL aborted the group's round";
  std::this_thread::sleep_for(2s);  // a few reports after the churn
  s = *status_json(status_port_);
  expect_live_figures(s);
  expect_metrics_match(status_port_);

  // The page in a real browser: a row per member and the plot drawn.
  TempDir browser;
  const RenderedPage page =
      render_in_chromium("http://127.0.0.1:" + std::to_string(status_port_) + "/", browser, 4000ms);
  ASSERT_TRUE(page.error.empty()) << page.error;
  const std::regex rows(R"(<tr class="peer">)");
  const auto n_rows = std::distance(std::sregex_iterator(page.dom.begin(), page.dom.end(), rows),
                                    std::sregex_iterator());
  EXPECT_GE(n_rows, 2) << page.dom;
  const std::regex engine_rows(R"(<tr class="engine">)");
  EXPECT_GE(std::distance(std::sregex_iterator(page.dom.begin(), page.dom.end(), engine_rows),
                          std::sregex_iterator()),
            2)
      << "a sync-engine row per trainer, with its overlap";
  EXPECT_NE(page.dom.find("<th>step time</th>"), std::string::npos);
  EXPECT_NE(page.dom.find("data-rendered=\""), std::string::npos) << page.dom;
  std::smatch plot;
  ASSERT_TRUE(
      std::regex_search(page.dom, plot, std::regex(R"re(data-points="(\d+)" data-ink="(\d+)")re")))
      << page.dom;
  EXPECT_GE(std::stoi(plot[1]), 10);
  EXPECT_GT(std::stoi(plot[2]), 50) << "the throughput line's pixels";
  for (const auto& p : s["peers"])
    EXPECT_NE(page.dom.find(p["address"].get<std::string>()), std::string::npos);
  EXPECT_NE(page.dom.find("left gracefully"), std::string::npos) << "events with reasons";
  EXPECT_GT(std::filesystem::file_size(page.screenshot), 10000u);
  if (const char* keep = std::getenv("LONGHAUL_STATUS_SCREENSHOT"))
    std::filesystem::copy_file(page.screenshot, keep,
                               std::filesystem::copy_options::overwrite_existing);
}

// A raw TCP connection to the status port; -1 on failure.
int connect_raw(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Clients that connect and send nothing, dribble a request a byte at a time, or ask for /metrics
// and never read it, more of them than the status server has threads: peers still join, epochs
// commit and heartbeats flow, because the master's event loop never waits on HTTP. Once they are
// gone the page answers again. The master's log is JSON lines throughout.
TEST_F(StatusPageTest, SlowHttpClientsDoNotStallTheMaster) {
  std::vector<Child*> peers = {&cluster_.add_peer(), &cluster_.add_peer()};
  ASSERT_TRUE(cluster_.wait_agreement(peers, 2));
  std::vector<int> fds;
  for (int i = 0; i < 12; ++i) {
    const int fd = connect_raw(status_port_);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    if (i % 3 == 2) {
      int small = 4096;
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    }
  }
  std::atomic<bool> stop{false};
  std::thread dribble([&] {
    const std::string partial = "GET / HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for (size_t i = 0; !stop; ++i) {
      for (size_t k = 1; k < fds.size(); k += 3)
        ::send(fds[k], &partial[std::min(i, partial.size() - 1)], 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(200ms);
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  peers.push_back(&cluster_.add_peer());
  peers.push_back(&cluster_.add_peer({"--group", "1"}));
  EXPECT_TRUE(cluster_.wait_agreement(peers, 4));
  const auto joined_in = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(joined_in, 30s) << "the joins waited on the slow HTTP clients";
  std::this_thread::sleep_for(1500ms);  // several heartbeat intervals with the clients held
  stop = true;
  dribble.join();
  for (int fd : fds) ::close(fd);
  bool met = false;
  const Json s = wait_status(
      status_port_, [](const Json& j) { return count_state(j, "member") == 4; }, 30s, &met);
  EXPECT_TRUE(met) << s.dump(1);
  EXPECT_EQ(count_events(s, "lost"), 0u) << "nobody missed heartbeats: " << s["events"].dump(1);
  const std::string log = cluster_.master().stderr_text();
  size_t lines = 0;
  for (size_t at = 0; at < log.size();) {
    const size_t end = log.find('\n', at);
    const std::string line = log.substr(at, end - at);
    at = end == std::string::npos ? log.size() : end + 1;
    if (line.empty()) continue;
    ++lines;
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << "not a JSON line: " << line;
    EXPECT_TRUE(j.contains("ts") && j.contains("level") && j.contains("component") &&
                j.contains("msg"))
        << line;
  }
  EXPECT_GT(lines, 4u);
}

}  // namespace
}  // namespace longhaul::testing
