// The read-only HTTP server: routes, methods, headers, loopback binding, and clients that connect
// and then send nothing, dribble, or never read their answer.
#include "ops/http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace longhaul::ops {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<HttpServer> serve(std::atomic<int>* calls, HttpOptions options = {}) {
  std::map<std::string, HttpHandler> routes;
  routes["/a.b"] = [calls] {
    ++*calls;
    return HttpResponse{200, "text/plain", std::string(1 << 20, 'x')};  // 1 MiB: fills buffers
  };
  auto s = HttpServer::start(options, std::move(routes));
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? std::move(*s) : nullptr;
}

// A raw TCP connection to 127.0.0.1:port; -1 on failure.
int connect_raw(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(HttpServerTest, ServesExactPathsReadOnlyOnLoopback) {
  std::atomic<int> calls{0};
  auto server = serve(&calls);
  ASSERT_TRUE(server);
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()) + "/");
  httplib::Client client("127.0.0.1", server->port());
  auto ok = client.Get("/a.b");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body.size(), 1u << 20);
  EXPECT_EQ(ok->get_header_value("Cache-Control"), "no-store");
  EXPECT_EQ(ok->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(client.Get("/aXb")->status, 404) << "the dot is not a pattern";
  EXPECT_EQ(client.Get("/a.b/")->status, 404);
  EXPECT_EQ(client.Post("/a.b", "x", "text/plain")->status, 405);
  EXPECT_EQ(client.Delete("/a.b")->status, 405);
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpServerTest, AnAddressInUseIsAnError) {
  std::atomic<int> calls{0};
  auto first = serve(&calls);
  ASSERT_TRUE(first);
  HttpOptions again;
  again.port = first->port();
  auto second = HttpServer::start(again, {});
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), LH_ERR_IO);
}

// Clients that hold a connection without finishing a request, or without reading the answer,
// each hold one server thread until the timeouts; the other threads keep answering, and once the
// timeouts pass every thread is free again.
TEST(HttpServerTest, SilentDribblingAndNonReadingClientsDoNotStopOthers) {
  std::atomic<int> calls{0};
  HttpOptions options;
  options.threads = 4;
  options.read_timeout = 1000ms;
  options.write_timeout = 1000ms;
  auto server = serve(&calls, options);
  ASSERT_TRUE(server);
  const int silent = connect_raw(server->port());
  const int dribbler = connect_raw(server->port());
  const int deaf = connect_raw(server->port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(dribbler, 0);
  ASSERT_GE(deaf, 0);
  int small = 4096;  // a small receive buffer so the 1 MiB answer cannot all be buffered
  ::setsockopt(deaf, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::string request = "GET /a.b HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(deaf, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::atomic<bool> stop{false};
  std::thread dribble([&] {
    const char* partial = "GET /a.b HTTP/1.1\r\nX-Slow: ";
    for (size_t i = 0; !stop && i < 200; ++i) {
      ::send(dribbler, partial + (i < 27 ? i : 26), 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(100ms);
    }
  });
  // While they hang, another client is served, more than once and quickly.
  for (int i = 0; i < 3; ++i) {
    httplib::Client client("127.0.0.1", server->port());
    client.set_connection_timeout(5);
    client.set_read_timeout(5);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = client.Get("/a.b");
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  }
  // The silent client is dropped after the read timeout: its next read sees the end.
  char byte;
  timeval tv{5, 0};
  ::setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0) << "closed by the server";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
  stop = true;
  dribble.join();
  ::close(silent);
  ::close(dribbler);
  ::close(deaf);
  // The server stops promptly even though clients misbehaved (the destructor joins).
  const auto t1 = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 5s);
}

// Issue 50, item 6: idle connections beyond the cap shed the oldest idle one, so the server holds
// at most max_connections descriptors and a real request still gets its answer at once; HEAD has
// no body and a request announcing a body is refused.
TEST(HttpServerTest, IdleConnectionsBeyondTheCapShedTheOldestAndARequestIsAnswered) {
  std::atomic<int> calls{0};
  HttpOptions options;
  options.max_connections = 4;
  options.idle_timeout = 5000ms;  // longer than the test: only the cap frees them
  options.read_timeout = 5000ms;
  auto server = serve(&calls, options);
  ASSERT_TRUE(server);
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(connect_raw(server->port()));
  for (int i = 0; i < 200 && server->refused_count() < 16; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_LE(server->open_connections(), 4u);
  EXPECT_GE(server->refused_count(), 16u);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(5);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = client.Get("/a.b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  auto head = client.Head("/a.b");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(client.Post("/a.b", std::string(4096, 'x'), "text/plain")->status, 413);
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace longhaul::ops
