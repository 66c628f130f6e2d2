// The congestion control tune_socket gives a connection (SocketOptions::congestion_control):
// BBR for "auto" where the kernel offers it, the system's default for "system", a named
// algorithm exactly, and an error naming TCP_CONGESTION for one the kernel does not have.
#include "net/socket_tuning.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

namespace longhaul::net {
namespace {

std::string read_sysctl(const std::string& name) {
  std::ifstream in("/proc/sys/net/ipv4/" + name);
  std::string line;
  std::getline(in, line);
  return line;
}

bool kernel_offers(const std::string& algorithm) {
  std::istringstream words(read_sysctl("tcp_available_congestion_control"));
  for (std::string word; words >> word;)
    if (word == algorithm) return true;
  return false;
}

// A connected client socket over loopback (the accepted end is kept open beside it).
class TunedSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    acceptor_.open(asio::ip::tcp::v4());
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    client_.connect(acceptor_.local_endpoint());
    acceptor_.accept(server_);
  }

  Status tune(const std::string& congestion_control) {
    SocketOptions options;
    options.congestion_control = congestion_control;
    return tune_socket(client_, options);
  }
  std::string algorithm() { return congestion_control_of(client_.native_handle()); }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_{io_};
  asio::ip::tcp::socket client_{io_};
  asio::ip::tcp::socket server_{io_};
};

TEST_F(TunedSocket, SystemLeavesTheDefault) {
  ASSERT_TRUE(tune("system").is_ok());
  EXPECT_EQ(algorithm(), read_sysctl("tcp_congestion_control"));
}

TEST_F(TunedSocket, AutoPicksBbrWhereTheKernelHasIt) {
  const std::string before = algorithm();
  ASSERT_TRUE(tune("auto").is_ok());
  // Root may pick any algorithm the kernel has; others those in tcp_allowed_congestion_control.
  const bool allowed =
      ::geteuid() == 0 ||
      read_sysctl("tcp_allowed_congestion_control").find("bbr") != std::string::npos;
  if (kernel_offers("bbr") && allowed)
    EXPECT_EQ(algorithm(), "bbr");
  else
    EXPECT_EQ(algorithm(), before) << "auto without BBR keeps the system's algorithm";
}

TEST_F(TunedSocket, NamedAlgorithmIsApplied) {
  // Reno is built into every Linux kernel and always allowed.
  ASSERT_TRUE(tune("reno").is_ok());
  EXPECT_EQ(algorithm(), "reno");
}

TEST_F(TunedSocket, UnknownAlgorithmFailsWithItsName) {
  const Status s = tune("no-such-cc");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("TCP_CONGESTION=no-such-cc"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace longhaul::net
