// A small read-only HTTP server for status pages and Prometheus metrics (docs/operations.md), on
// cpp-httplib (Debian's libcpp-httplib-dev): the parsing is the library's, this adds the policy.
//
// Policy: GET (and HEAD) on the registered paths only; every other method is 405 and every other
// path 404; requests carry no body (a Content-Length over kMaxBodyBytes is refused by the library).
// Each connection is served on one of the server's own threads, with read and write timeouts, so a
// client that connects and sends nothing, or never reads its answer, holds one of those threads
// until its timeout and nothing else: handlers must only copy already-published data (they must
// never wait on the caller's event loop). Responses say no-store and nosniff, and the page's
// Content-Security-Policy allows no other origin.
//
// Thread-safety: handlers run concurrently on the server's threads. The destructor stops the
// server and joins its threads (waiting at most about one timeout for slow clients).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/status.hpp"

namespace httplib {
class Server;
}

namespace longhaul::ops {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
using HttpHandler = std::function<HttpResponse()>;

struct HttpOptions {
  // Loopback by default: the endpoints are read-only and hold no secret, but they show the run's
  // membership and addresses, which the operator opens to others explicitly.
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0 = ephemeral (read it back with port())
  unsigned threads = 4;
  std::chrono::milliseconds read_timeout{2000};
  std::chrono::milliseconds write_timeout{2000};
};

class HttpServer {
 public:
  static constexpr size_t kMaxBodyBytes = 1024;

  // Binds host:port and serves `routes` (exact paths) from a thread of its own. Errors: the address
  // does not bind (LH_ERR_IO), bad options (LH_ERR_INVALID_ARGUMENT).
  static Result<std::unique_ptr<HttpServer>> start(const HttpOptions& options,
                                                   std::map<std::string, HttpHandler> routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  // "http://host:port/", IPv6 hosts in brackets.
  std::string url() const;

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  uint16_t port_ = 0;
};

}  // namespace longhaul::ops
