// Inside HttpServer (http_server.hpp): the I/O context and its threads, the table of open
// connections that enforces max_connections, and the rate-limited refusal log. Shared by
// http_server.cpp (lifecycle, accepting, admission) and http_serve.cpp (one connection).
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "common/mutex.hpp"
#include "ops/http_server.hpp"

namespace longhaul::ops {

struct HttpConnection {
  explicit HttpConnection(asio::io_context& io)
      : strand(asio::make_strand(io)), socket(strand), deadline(strand) {}
  asio::strand<asio::io_context::executor_type> strand;
  asio::ip::tcp::socket socket;
  asio::steady_timer deadline;         // closes the socket when it fires
  std::atomic<bool> answering{false};  // its whole request arrived: no longer sheddable
};

struct HttpServer::Impl {
  Impl(HttpOptions o, std::map<std::string, HttpHandler> r)
      : options(std::move(o)), routes(std::move(r)) {}
  ~Impl();

  asio::awaitable<void> accept_loop();
  // Takes a place in the table for `conn`: sheds the oldest connection still sending its request
  // when the table is full; false when every open connection is being answered.
  bool admit(const std::shared_ptr<HttpConnection>& conn);
  void release(const std::shared_ptr<HttpConnection>& conn);
  // A 503 written without waiting (whatever fits the socket's buffer), then closed.
  void refuse(asio::ip::tcp::socket& socket);
  // One more refusal or shed; a warning at most every kWarnEvery, with the count since the last.
  void note_dropped(const char* what);
  asio::awaitable<void> serve(std::shared_ptr<HttpConnection> conn);    // http_serve.cpp
  HttpResponse answer(const std::string& head, bool* head_only) const;  // http_serve.cpp

  static constexpr std::chrono::seconds kWarnEvery{5};

  // Declared first: destroyed last, after everything that refers to it.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  const HttpOptions options;
  const std::map<std::string, HttpHandler> routes;
  std::vector<std::thread> threads;
  std::string host;
  uint16_t port = 0;
  std::atomic<uint64_t> refused{0};
  mutable Mutex mu;
  std::list<std::shared_ptr<HttpConnection>> open GUARDED_BY(mu);  // oldest first
  std::chrono::steady_clock::time_point last_warning GUARDED_BY(mu){};
  uint64_t unlogged GUARDED_BY(mu) = 0;
};

}  // namespace longhaul::ops
