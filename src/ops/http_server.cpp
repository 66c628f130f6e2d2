#include "ops/http_server.hpp"

#include <sys/socket.h>

#include <algorithm>

#include <fmt/format.h>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "common/log.hpp"
#include "ops/http_request.hpp"
#include "ops/http_server_impl.hpp"

namespace longhaul::ops {

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpOptions& options,
                                                      std::map<std::string, HttpHandler> routes) {
  if (options.threads == 0 || options.threads > 256)
    return invalid_argument("HTTP server threads must be 1..256");
  if (options.idle_timeout.count() <= 0 || options.read_timeout.count() <= 0 ||
      options.write_timeout.count() <= 0)
    return invalid_argument("HTTP timeouts must be positive");
  if (options.max_connections == 0) return invalid_argument("HTTP max_connections must be >= 1");
  auto impl = std::make_unique<Impl>(options, std::move(routes));
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(impl->io);
  auto results = resolver.resolve(options.host, std::to_string(options.port),
                                  asio::ip::resolver_base::passive, ec);
  if (!ec && results.empty()) ec = asio::error::host_not_found;
  if (!ec) {
    const asio::ip::tcp::endpoint endpoint = *results.begin();
    // SO_REUSEADDR only (asio's reuse_address): a second process must not share the port.
    impl->acceptor.open(endpoint.protocol(), ec);
    if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) impl->acceptor.bind(endpoint, ec);
    if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec)
    return io_error(
        fmt::format("cannot serve HTTP on {}:{}: {}", options.host, options.port, ec.message()));
  impl->host = options.host;
  impl->port = impl->acceptor.local_endpoint().port();
  Impl* raw = impl.get();
  asio::co_spawn(
      impl->io, [raw] { return raw->accept_loop(); }, asio::detached);
  for (unsigned i = 0; i < options.threads; ++i)
    impl->threads.emplace_back([raw] { raw->io.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

HttpServer::Impl::~Impl() {
  io.stop();
  for (auto& t : threads) t.join();
  MutexLock lock(mu);
  open.clear();  // before io, which still holds the coroutines that refer to them
}

uint16_t HttpServer::port() const {
  return impl_->port;
}

std::string HttpServer::url() const {
  const bool v6 = impl_->host.find(':') != std::string::npos;
  return fmt::format("http://{}{}{}:{}/", v6 ? "[" : "", impl_->host, v6 ? "]" : "", impl_->port);
}

size_t HttpServer::open_connections() const {
  MutexLock lock(impl_->mu);
  return impl_->open.size();
}

uint64_t HttpServer::refused_count() const {
  return impl_->refused.load();
}

asio::awaitable<void> HttpServer::Impl::accept_loop() {
  for (;;) {
    auto conn = std::make_shared<HttpConnection>(io);
    asio::error_code ec;
    co_await acceptor.async_accept(conn->socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors, or the like: pause a little rather than spin on the error.
      note_dropped("accept failed");
      asio::steady_timer pause(io, std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (!admit(conn)) {
      refuse(conn->socket);
      continue;
    }
    asio::co_spawn(
        conn->strand, [this, conn] { return serve(conn); }, asio::detached);
  }
}

bool HttpServer::Impl::admit(const std::shared_ptr<HttpConnection>& conn) {
  std::shared_ptr<HttpConnection> shed;
  {
    MutexLock lock(mu);
    if (open.size() >= options.max_connections) {
      auto oldest = std::find_if(open.begin(), open.end(),
                                 [](const auto& c) { return !c->answering.load(); });
      if (oldest == open.end()) return false;
      shed = *oldest;
      open.erase(oldest);
    }
    open.push_back(conn);
  }
  if (shed) {
    note_dropped("an open connection that had not sent its request was closed to make room");
    asio::post(shed->strand, [shed] {
      asio::error_code ignored;
      shed->socket.close(ignored);
      shed->deadline.cancel();
    });
  }
  return true;
}

void HttpServer::Impl::release(const std::shared_ptr<HttpConnection>& conn) {
  MutexLock lock(mu);
  open.remove(conn);
}

void HttpServer::Impl::refuse(asio::ip::tcp::socket& socket) {
  note_dropped("a new connection was refused (503)");
  const std::string busy =
      render_response(503, "text/plain; charset=utf-8", "busy: too many connections\n", false);
  (void)::send(socket.native_handle(), busy.data(), busy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  asio::error_code ignored;
  socket.close(ignored);
}

void HttpServer::Impl::note_dropped(const char* what) {
  ++refused;
  const auto now = std::chrono::steady_clock::now();
  uint64_t since = 0;
  {
    MutexLock lock(mu);
    if (now - last_warning < kWarnEvery) {
      ++unlogged;
      return;
    }
    last_warning = now;
    since = unlogged;
    unlogged = 0;
  }
  log::warn("ops", "HTTP server on {}:{} (at most {} connections): {}{}", host, port,
            options.max_connections, what,
            since ? fmt::format("; {} more dropped since the last warning", since) : "");
}

}  // namespace longhaul::ops
