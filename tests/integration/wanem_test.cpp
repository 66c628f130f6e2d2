// longhaul-wanem as a real process between real sockets on loopback: latency, rate caps, byte
// integrity under jitter, faults (reset, black hole, heal), deferred targets, the command
// protocol and its errors. Bounds are loose enough for a loaded 2-core machine but still fail
// when the emulator does not shape (latency has a hard lower bound: timers never fire early).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <random>
#include <thread>

#include "wanem_support.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string route_to(const TestServer& server, const std::string& options = "") {
  return "a=127.0.0.1:0>" + server.address() + options;
}

// One echo round trip of `n` bytes; the time in ms, or -1 when it failed.
double echo_rtt(Client& c, size_t n = 1) {
  std::string out(n, 'p'), in(n, '\0');
  const auto t = Clock::now();
  if (!c.write_all(out.data(), n, 5s) || !c.read_exact(in.data(), n, 5s) || in != out) return -1;
  return ms_since(t);
}

// Waits until the sink has seen `bytes` on each of `conns` connections.
bool wait_received(const TestServer& sink, size_t conns, uint64_t bytes,
                   std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    auto all = sink.connections();
    if (all.size() >= conns && std::all_of(all.begin(), all.end(), [&](const ServerConnStats& s) {
          return s.bytes >= bytes;
        }))
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

double mbit_per_s(uint64_t bytes, Clock::time_point first, Clock::time_point last) {
  return static_cast<double>(bytes) * 8 / std::chrono::duration<double>(last - first).count() / 1e6;
}

TEST(Wanem, AddsOneWayLatencyInEachDirection) {
  TestServer echo(TestServer::Mode::kEcho);
  Wanem wanem({"--route", route_to(echo, ",latency_ms=40")});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Client c(wanem.port("a"));
  ASSERT_GE(c.fd(), 0);
  std::vector<double> rtts;
  for (int i = 0; i < 9; ++i) rtts.push_back(echo_rtt(c));
  std::sort(rtts.begin(), rtts.end());
  ASSERT_GT(rtts.front(), 0) << "an echo failed";
  // 40 ms each way: at least 80 ms (no early delivery), median within a loaded machine's slack.
  EXPECT_GE(rtts.front(), 79.9);
  EXPECT_LE(rtts[rtts.size() / 2], 120.0);
}

TEST(Wanem, CapsTheRouteRate) {
  TestServer sink(TestServer::Mode::kSink);
  Wanem wanem({"--route", route_to(sink, ",rate_mbit=80")});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Client c(wanem.port("a"));
  const std::string data(10'000'000, 'r');  // 1 s at 80 Mbit/s
  ASSERT_TRUE(c.write_all(data.data(), data.size(), 20s));
  ASSERT_TRUE(wait_received(sink, 1, data.size(), 20s));
  const auto s = sink.connections()[0];
  const double rate = mbit_per_s(s.bytes, s.first_byte, s.last_byte);
  EXPECT_GE(rate, 64.0);
  EXPECT_LE(rate, 96.0);
}

TEST(Wanem, SharesThePathCapFairlyAndCapsEachConnection) {
  TestServer sink(TestServer::Mode::kSink);
  // The path allows 80 Mbit/s, each connection 60: two connections share the 80 about equally.
  Wanem wanem({"--route", route_to(sink, ",rate_mbit=80,conn_rate_mbit=60")});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  const std::string data(5'000'000, 's');
  Client c1(wanem.port("a")), c2(wanem.port("a"));
  bool ok1 = false, ok2 = false;
  std::thread t1([&] { ok1 = c1.write_all(data.data(), data.size(), 20s); });
  std::thread t2([&] { ok2 = c2.write_all(data.data(), data.size(), 20s); });
  t1.join();
  t2.join();
  ASSERT_TRUE(ok1 && ok2);
  ASSERT_TRUE(wait_received(sink, 2, data.size(), 20s));
  const auto conns = sink.connections();
  const auto first = std::min(conns[0].first_byte, conns[1].first_byte);
  const auto last = std::max(conns[0].last_byte, conns[1].last_byte);
  const double total = mbit_per_s(conns[0].bytes + conns[1].bytes, first, last);
  EXPECT_GE(total, 64.0);
  EXPECT_LE(total, 96.0);
  // Fair: the two equal transfers finish close together (an unfair cap would let one finish at
  // ~0.6 s of the ~1 s).
  const double spread =
      std::chrono::duration<double>(conns[0].last_byte - conns[1].last_byte).count();
  EXPECT_LE(std::abs(spread), 0.2 * std::chrono::duration<double>(last - first).count());

  // One connection alone is held to its own 60 Mbit/s.
  Client c3(wanem.port("a"));
  ASSERT_TRUE(c3.write_all(data.data(), data.size(), 20s));
  ASSERT_TRUE(wait_received(sink, 3, data.size(), 20s));
  const auto s = sink.connections()[2];
  const double alone = mbit_per_s(s.bytes, s.first_byte, s.last_byte);
  EXPECT_GE(alone, 48.0);
  EXPECT_LE(alone, 72.0);
}

TEST(Wanem, KeepsEveryByteInOrderUnderJitterBothWays) {
  TestServer echo(TestServer::Mode::kEcho);
  // Jitter larger than the latency: without the in-order rule chunks would overtake each other.
  Wanem wanem({"--route", route_to(echo, ",latency_ms=2,jitter_ms=5"), "--seed", "7"});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Client c(wanem.port("a"));
  std::mt19937_64 rng(42);
  std::string data(16 << 20, '\0');
  for (auto& ch : data) ch = static_cast<char>(rng());
  bool wrote = true;
  std::thread writer([&] {
    std::uniform_int_distribution<size_t> piece(1, 100'000);
    for (size_t off = 0; off < data.size() && wrote;) {
      const size_t n = std::min(piece(rng), data.size() - off);
      wrote = c.write_all(data.data() + off, n, 30s);
      off += n;
    }
  });
  std::string back(data.size(), '\0');
  const bool read = c.read_exact(back.data(), back.size(), 30s);
  writer.join();
  ASSERT_TRUE(wrote && read);
  EXPECT_TRUE(back == data) << "bytes differ after the round trip";
  const std::string stats = wanem.command("stats a");
  EXPECT_NE(stats.find("up_bytes=" + std::to_string(data.size())), std::string::npos) << stats;
  EXPECT_NE(stats.find("down_bytes=" + std::to_string(data.size())), std::string::npos) << stats;
}

TEST(Wanem, ResetGivesBothEndpointsAnErrorPromptly) {
  TestServer echo(TestServer::Mode::kEcho);
  Wanem wanem({"--route", route_to(echo)});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Client c(wanem.port("a"));
  ASSERT_GT(echo_rtt(c), 0);
  const auto t = Clock::now();
  EXPECT_EQ(wanem.command("reset a"), "OK RESET a 1");
  char buf[16];
  const auto r = c.read_some(buf, sizeof buf, 2s);
  EXPECT_EQ(r.outcome, Client::Outcome::kError);
  EXPECT_EQ(r.error, ECONNRESET);
  EXPECT_LE(ms_since(t), 1000);
  // The server side got an RST too.
  const auto deadline = Clock::now() + 2s;
  while (!echo.connections()[0].ended && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(echo.connections()[0].ended);
  EXPECT_EQ(echo.connections()[0].error, ECONNRESET);
  // The route still accepts new connections.
  Client again(wanem.port("a"));
  EXPECT_GT(echo_rtt(again), 0);
}

TEST(Wanem, BlackHoleIsSilentWithoutClosingAndHealDeliversTheHeldBytes) {
  TestServer echo(TestServer::Mode::kEcho);
  Wanem wanem({"--route", route_to(echo)});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Client c(wanem.port("a"));
  ASSERT_GT(echo_rtt(c), 0);
  EXPECT_EQ(wanem.command("blackhole a"), "OK BLACKHOLE a");
  ASSERT_TRUE(c.write_all("held!", 5, 2s));
  Client late(wanem.port("a"));  // a new connection during the black hole is held too
  ASSERT_TRUE(late.write_all("late", 4, 2s));
  char buf[16];
  EXPECT_EQ(c.read_some(buf, sizeof buf, 700ms).outcome, Client::Outcome::kTimeout);
  EXPECT_EQ(late.read_some(buf, sizeof buf, 10ms).outcome, Client::Outcome::kTimeout);
  EXPECT_EQ(echo.connections().size(), 1u) << "the held connection reached the target";
  EXPECT_NE(wanem.command("stats a").find("state=blackhole"), std::string::npos);
  EXPECT_EQ(wanem.command("heal a"), "OK HEAL a");
  ASSERT_TRUE(c.read_exact(buf, 5, 2s));
  EXPECT_EQ(std::string(buf, 5), "held!");
  ASSERT_TRUE(late.read_exact(buf, 4, 2s));
  EXPECT_EQ(std::string(buf, 4), "late");
  EXPECT_GT(echo_rtt(c), 0);
}

TEST(Wanem, DeferredTargetHoldsConnectionsUntilSet) {
  TestServer echo(TestServer::Mode::kEcho);
  Wanem wanem({"--route", "a=127.0.0.1:0>-"});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Client c(wanem.port("a"));
  ASSERT_TRUE(c.write_all("early", 5, 2s));
  char buf[16];
  EXPECT_EQ(c.read_some(buf, sizeof buf, 300ms).outcome, Client::Outcome::kTimeout);
  EXPECT_EQ(wanem.command("target a " + echo.address()), "OK TARGET a " + echo.address());
  ASSERT_TRUE(c.read_exact(buf, 5, 2s));
  EXPECT_EQ(std::string(buf, 5), "early");
}

TEST(Wanem, DeferredTargetTimesOutWithAReset) {
  Wanem wanem({"--route", "a=127.0.0.1:0>-", "--target-timeout-ms", "300"});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  const auto t = Clock::now();
  Client c(wanem.port("a"));
  char buf[16];
  const auto r = c.read_some(buf, sizeof buf, 3s);
  EXPECT_EQ(r.outcome, Client::Outcome::kError);
  EXPECT_EQ(r.error, ECONNRESET);
  EXPECT_GE(ms_since(t), 250);
}

TEST(Wanem, RoutesAndShapesChangeAtRunTime) {
  TestServer echo(TestServer::Mode::kEcho);
  Wanem wanem({});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  const std::string added =
      wanem.command("route b 127.0.0.1:0 " + echo.address() + " latency_ms=30");
  ASSERT_EQ(added.rfind("OK ROUTE b ", 0), 0u) << added;
  Client c(static_cast<uint16_t>(std::stoi(added.substr(11))));
  EXPECT_GE(echo_rtt(c), 59.9);
  EXPECT_EQ(wanem.command("set b latency_ms=0 jitter_ms=0"),
            "OK SET b latency_ms=0 jitter_ms=0 rate_mbit=0 conn_rate_mbit=0");
  const double rtt = echo_rtt(c);
  EXPECT_GT(rtt, 0);
  EXPECT_LT(rtt, 50);
  EXPECT_EQ(wanem.command("route b 127.0.0.1:0 " + echo.address()).rfind("ERR route b exists", 0),
            0u);
}

TEST(Wanem, BadCommandsAreAnsweredWithErrAndChangeNothing) {
  TestServer echo(TestServer::Mode::kEcho);
  Wanem wanem({"--route", route_to(echo)});
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  EXPECT_EQ(wanem.command("explode a").rfind("ERR unknown command 'explode'", 0), 0u);
  EXPECT_EQ(wanem.command("stats nosuch").rfind("ERR no route named 'nosuch'", 0), 0u);
  EXPECT_EQ(wanem.command("set a latency_ms=5 color=blue").rfind("ERR unknown setting 'color'", 0),
            0u);
  EXPECT_EQ(wanem.command("set a latency_ms=-1").rfind("ERR latency_ms needs a number", 0), 0u);
  EXPECT_EQ(wanem.command("target a nowhere").rfind("ERR target: 'nowhere' is not host:port", 0),
            0u);
  EXPECT_EQ(wanem.command("reset").rfind("ERR usage", 0), 0u);
  EXPECT_EQ(wanem.command("route c 127.0.0.1:0").rfind("ERR usage", 0), 0u);
  // The refused `set` changed nothing, and the route still forwards.
  EXPECT_NE(wanem.command("stats a").find("latency_ms=0 "), std::string::npos);
  Client c(wanem.port("a"));
  EXPECT_GT(echo_rtt(c), 0);
}

// Runs the emulator with `args` expecting it to refuse them: its exit code and stderr.
std::pair<int, std::string> refused(std::vector<std::string> args) {
  TempDir dir;
  args.insert(args.begin(), LONGHAUL_WANEM_BIN);
  Child child(args, dir.path() + "/err.log");
  const auto code = child.wait_exit(10s);
  return {code.value_or(-1), child.stderr_text()};
}

TEST(Wanem, BadFlagsExitNonZeroWithAClearMessage) {
  auto [code, err] = refused({"--route", "nonsense"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("bad route 'nonsense': no '=' after the name"), std::string::npos) << err;
  std::tie(code, err) = refused({"--route", "a=127.0.0.1:0>127.0.0.1:9,latency_ms=abc"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("latency_ms needs a number"), std::string::npos) << err;
  std::tie(code, err) = refused({"--route", "a=127.0.0.1:0>127.0.0.1:0"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("port 0 cannot be connected to"), std::string::npos) << err;
  std::tie(code, err) = refused({"--frobnicate", "1"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("unknown option '--frobnicate'"), std::string::npos) << err;
  std::tie(code, err) = refused({"--route", "a=127.0.0.1:0>-", "--schedule", "1s:explode:a"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("unknown action 'explode'"), std::string::npos) << err;
  std::tie(code, err) = refused({"--route", "a=127.0.0.1:0>-", "--schedule", "1s:reset:b"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("names route 'b'"), std::string::npos) << err;
  // A listen port in use is an environment error, not a usage error.
  TestServer taken(TestServer::Mode::kSink);
  std::tie(code, err) = refused({"--route", "a=" + taken.address() + ">-"});
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("cannot listen on " + taken.address()), std::string::npos) << err;
}

TEST(Wanem, HelpDescribesRoutesAndTheCommandProtocol) {
  TempDir dir;
  Child help({LONGHAUL_WANEM_BIN, "--help"}, dir.path() + "/help.log");
  EXPECT_EQ(help.wait_exit(10s), 0);
  // The example closes the text; wait for it so the reader thread has every line.
  EXPECT_TRUE(help.wait_line(
      [](const std::string& l) { return l.find("rate_mbit=100'") != std::string::npos; }, 10s));
  std::string text;
  for (const auto& line : help.lines()) text += line + "\n";
  for (const char* needle : {"--route SPEC", "NAME=LISTEN>TARGET", "ROUTE NAME PORT", "READY",
                             "blackhole NAME", "heal NAME", "stats NAME", "--schedule", "SIGTERM"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
}

TEST(Wanem, ScheduleInjectsFaultsOnTime) {
  TestServer echo(TestServer::Mode::kEcho);
  Wanem wanem(
      {"--route", route_to(echo), "--schedule", "300ms:blackhole:a,800ms:heal:a,1200ms:reset:a"});
  const auto start = Clock::now();
  ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
  Client c(wanem.port("a"));
  ASSERT_GT(echo_rtt(c), 0);
  std::this_thread::sleep_for(400ms - (Clock::now() - start));
  // Sent inside the black hole, echoed after the heal.
  ASSERT_TRUE(c.write_all("x", 1, 1s));
  char buf[16];
  ASSERT_TRUE(c.read_exact(buf, 1, 3s));
  EXPECT_GE(ms_since(start), 750);
  const auto r = c.read_some(buf, sizeof buf, 3s);
  EXPECT_EQ(r.outcome, Client::Outcome::kError);
  EXPECT_GE(ms_since(start), 1150);
}

TEST(Wanem, QuitAndSigtermCloseEverythingAndExitZero) {
  TestServer echo(TestServer::Mode::kEcho);
  {
    Wanem wanem({"--route", route_to(echo)});
    ASSERT_TRUE(wanem.ready()) << wanem.child().stderr_text();
    Client c(wanem.port("a"));
    ASSERT_GT(echo_rtt(c), 0);
    EXPECT_EQ(wanem.command("quit"), "OK QUIT");
    EXPECT_EQ(wanem.child().wait_exit(5s), 0);
  }
  // End of stdin keeps it running (daemon use); SIGTERM ends it with status 0.
  TempDir dir;
  Child daemon({"/bin/sh", "-c", "exec \"$0\" \"$@\" </dev/null", LONGHAUL_WANEM_BIN, "--route",
                route_to(echo)},
               dir.path() + "/wanem.log");
  const auto ready = daemon.wait_line([](const std::string& l) { return l == "READY"; }, 20s);
  ASSERT_TRUE(ready) << daemon.stderr_text();
  const std::string route_line = daemon.last_line("ROUTE a ");
  std::this_thread::sleep_for(200ms);
  Client c(static_cast<uint16_t>(std::stoi(route_line.substr(8))));
  EXPECT_GT(echo_rtt(c), 0);
  daemon.kill(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(5s), 0);
  char buf[4];
  EXPECT_EQ(c.read_some(buf, sizeof buf, 2s).outcome, Client::Outcome::kClosed);
}

}  // namespace
}  // namespace longhaul::testing
