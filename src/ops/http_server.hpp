// A small read-only HTTP server for status pages and Prometheus metrics (docs/operations.md), on
// the project's one networking library (standalone Asio), with a tiny strict parser of its own
// (http_request.hpp).
//
// Why not cpp-httplib, which this used before (issue 50, item 6): Debian's 0.11.4 hands each
// accepted socket to a ThreadPool whose queue has no bound, inside a task that owns the socket, so
// a queue cannot refuse a connection without leaking its descriptor, and a connection that sends
// nothing holds a thread for the read timeout: 1,073 idle connections filled the master's
// descriptor table and the queue drained at about 2 a second. Nothing in front of it could hand it
// an accepted socket either. Here every connection is an asynchronous task with deadlines and no
// thread of its own.
//
// Policy: GET (and HEAD) on the registered paths only; every other method is 405 and every other
// path 404; requests carry no body (a Content-Length over kMaxBodyBytes is 413); one request per
// connection (Connection: close). Bounds: at most max_connections open at once; a new one beyond
// it closes the oldest that has not yet sent its whole request (an honest request takes
// milliseconds, so the oldest are the idle ones), or when every open one is being answered, it
// gets a 503 and is closed. A connection must send its first byte within idle_timeout and its whole
// request head (at most kMaxHeadBytes) within read_timeout of being accepted, and take its answer
// within write_timeout. Refusals and sheds are logged at most once per 5 s, with their count.
// Responses say no-store and nosniff, and the page's Content-Security-Policy allows no other
// origin.
//
// Thread-safety: handlers run concurrently on the server's threads and must only copy
// already-published data (never wait on the caller's event loop). The destructor stops the server
// and joins its threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.hpp"

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
  unsigned threads = 2;
  // Connections open at once (each one descriptor): the server's whole footprint.
  size_t max_connections = 64;
  // From accept: the first byte within idle_timeout, the whole request head within read_timeout.
  std::chrono::milliseconds idle_timeout{1000};
  std::chrono::milliseconds read_timeout{2000};
  // The whole answer written within this.
  std::chrono::milliseconds write_timeout{2000};
};

class HttpServer {
 public:
  static constexpr size_t kMaxBodyBytes = 1024;
  static constexpr size_t kMaxHeadBytes = 8192;

  // Binds host:port and serves `routes` (exact paths) from threads of its own. Errors: the address
  // does not bind (LH_ERR_IO), bad options (LH_ERR_INVALID_ARGUMENT).
  static Result<std::unique_ptr<HttpServer>> start(const HttpOptions& options,
                                                   std::map<std::string, HttpHandler> routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // "http://host:port/", IPv6 hosts in brackets.
  std::string url() const;
  // Connections open now; connections refused (503) or shed to make room so far.
  size_t open_connections() const;
  uint64_t refused_count() const;

  struct Impl;  // http_server.cpp

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace longhaul::ops
