// The packet lab (longhaul-wanem --site): real TCP between network namespaces through the
// forwarder sees the configured round trip, rate cap, loss and black hole, and the lab removes
// its namespaces when it ends. Needs root and /dev/net/tun; skipped otherwise.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "wanem_support.hpp"
#include "wanlab/netns.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A TCP socket that belongs to namespace `ns` (a socket keeps the namespace it was made in).
int socket_in(const std::string& ns) {
  int fd = -1;
  Status s = wanlab::in_namespace(ns, [&] {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return Status::ok();
  });
  return s ? fd : -1;
}

sockaddr_in ipv4(const std::string& addr, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
  return a;
}

struct Site {
  std::string netns, addr;
};

class WanLabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || !std::filesystem::exists("/dev/net/tun"))
      GTEST_SKIP() << "the packet lab needs root and /dev/net/tun";
  }
  void TearDown() override {
    if (!lab_) return;
    lab_->command("quit");
    const auto code = lab_->child().wait_exit(20s);
    EXPECT_EQ(code, std::optional<int>(0)) << lab_->child().stderr_text();
    for (const Site& s : sites_)
      EXPECT_FALSE(std::filesystem::exists("/run/netns/" + s.netns)) << s.netns << " left behind";
  }

  // Starts a two-site lab (a, b) with these extra flags; fails the test if it does not come up.
  void start(std::vector<std::string> flags) {
    std::vector<std::string> args = {"--site", "a", "--site", "b"};
    args.insert(args.end(), flags.begin(), flags.end());
    lab_ = std::make_unique<Wanem>(args);
    ASSERT_TRUE(lab_->ready()) << lab_->child().stderr_text();
    for (const std::string& line : lab_->child().lines()) {
      std::istringstream in(line);
      std::string word, name;
      Site s;
      if (in >> word >> name >> s.netns >> s.addr && word == "SITE") sites_.push_back(s);
    }
    ASSERT_EQ(sites_.size(), 2u);
  }

  // A listener in site b; returns its fd (port in *port).
  int listen_b(uint16_t* port) {
    const int fd = socket_in(sites_[1].netns);
    sockaddr_in a = ipv4(sites_[1].addr, 0);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd, 4) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return -1;
    *port = ntohs(a.sin_port);
    return fd;
  }

  // A connection from site a to b's listener; the accepted end in *server. Returns the client fd.
  int connect_a(int listener, uint16_t port, int* server, double* connect_ms = nullptr) {
    const int fd = socket_in(sites_[0].netns);
    const sockaddr_in a = ipv4(sites_[1].addr, port);
    const auto t0 = Clock::now();
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) return -1;
    if (connect_ms) *connect_ms = ms_since(t0);
    *server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(*server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  std::unique_ptr<Wanem> lab_;
  std::vector<Site> sites_;
};

// Reads exactly len bytes within `timeout`; false otherwise.
bool read_exact(int fd, char* buf, size_t len, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (len > 0) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t n = ::read(fd, buf, len);
    if (n <= 0) return false;
    buf += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const char* buf, size_t len) {
  while (len > 0) {
    const ssize_t n = ::write(fd, buf, len);
    if (n <= 0) return false;
    buf += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

TEST_F(WanLabTest, TcpSeesTheConfiguredRoundTrip) {
  start({"--latency-ms", "20"});
  uint16_t port = 0;
  const int listener = listen_b(&port);
  ASSERT_GE(listener, 0);
  int server = -1;
  double connect_ms = 0;
  const int client = connect_a(listener, port, &server, &connect_ms);
  ASSERT_GE(client, 0);
  ASSERT_GE(server, 0);
  EXPECT_GE(connect_ms, 40.0);  // SYN and SYN-ACK each cross 20 ms
  std::vector<double> rtts;
  char byte = 'x';
  for (int i = 0; i < 10; ++i) {
    const auto t0 = Clock::now();
    ASSERT_TRUE(write_all(client, &byte, 1));
    ASSERT_TRUE(read_exact(server, &byte, 1, 2s));
    ASSERT_TRUE(write_all(server, &byte, 1));
    ASSERT_TRUE(read_exact(client, &byte, 1, 2s));
    rtts.push_back(ms_since(t0));
  }
  std::sort(rtts.begin(), rtts.end());
  EXPECT_GE(rtts.front(), 40.0);
  EXPECT_LE(rtts[rtts.size() / 2], 60.0);  // loose: a loaded machine wakes late
  for (int fd : {client, server, listener}) ::close(fd);
}

TEST_F(WanLabTest, RateCapHoldsAndLostPacketsAreRetransmitted) {
  start({"--rate-mbit", "100", "--loss", "0.002", "--latency-ms", "2"});
  uint16_t port = 0;
  const int listener = listen_b(&port);
  int server = -1;
  const int client = connect_a(listener, port, &server);
  ASSERT_GE(client, 0);
  std::vector<char> sent(6 << 20), got(sent.size());
  std::mt19937 rng(7);
  for (char& c : sent) c = static_cast<char>(rng());
  std::thread writer([&] { write_all(client, sent.data(), sent.size()); });
  const auto t0 = Clock::now();
  const bool all = read_exact(server, got.data(), got.size(), 20s);
  const double seconds = ms_since(t0) / 1e3;
  writer.join();
  ASSERT_TRUE(all);
  EXPECT_TRUE(sent == got);  // lost segments were cut out of super-packets and resent intact
  const double mbit = static_cast<double>(sent.size()) * 8 / seconds / 1e6;
  EXPECT_LE(mbit, 110.0);
  EXPECT_GE(mbit, 50.0);
  const std::string stats = lab_->command("stats a>b");
  EXPECT_EQ(stats.rfind("OK STATS a>b", 0), 0u) << stats;
  EXPECT_EQ(stats.find(" lost=0 "), std::string::npos) << "no loss drawn: " << stats;
  for (int fd : {client, server, listener}) ::close(fd);
}

TEST_F(WanLabTest, BlackholeHoldsNothingAndHealLetsTcpRecover) {
  start({"--latency-ms", "1"});
  uint16_t port = 0;
  const int listener = listen_b(&port);
  int server = -1;
  const int client = connect_a(listener, port, &server);
  ASSERT_GE(client, 0);
  EXPECT_EQ(lab_->command("blackhole a-b"), "OK BLACKHOLE a-b");
  char buf[4] = {'p', 'i', 'n', 'g'};
  ASSERT_TRUE(write_all(client, buf, 4));
  EXPECT_FALSE(read_exact(server, buf, 4, 500ms));
  EXPECT_EQ(lab_->command("heal a-b"), "OK HEAL a-b");
  EXPECT_TRUE(read_exact(server, buf, 4, 10s));  // TCP's retransmission crosses once healed
  EXPECT_EQ(lab_->command("set a-b color=red").rfind("ERR", 0), 0u);
  EXPECT_EQ(lab_->command("stats a>c").rfind("ERR", 0), 0u);
  for (int fd : {client, server, listener}) ::close(fd);
}

TEST(WanLabFlags, RefusesALabOfOneSiteAndMixingWithRoutes) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--site", "a"},
        std::vector<std::string>{"--site", "a", "--site", "b", "--route", "x=127.0.0.1:0>-"},
        std::vector<std::string>{"--site", "a", "--site", "b", "--path", "a-c,latency_ms=1"}}) {
    TempDir dir;
    std::vector<std::string> argv = {LONGHAUL_WANEM_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    Child lab(argv, dir.path() + "/wanem.log");
    EXPECT_EQ(lab.wait_exit(10s), std::optional<int>(2)) << lab.stderr_text();
  }
}

}  // namespace
}  // namespace longhaul::testing
