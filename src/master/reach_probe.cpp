#include "master/reach_probe.hpp"

#include <memory>

#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/detached.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

namespace longhaul::master {
namespace {

asio::awaitable<void> probe(asio::any_io_executor executor, std::string host, uint16_t port,
                            std::chrono::milliseconds timeout, std::function<void(bool)> done) {
  auto socket = std::make_shared<asio::ip::tcp::socket>(executor);
  auto expired = std::make_shared<bool>(false);
  asio::steady_timer deadline(executor, timeout);
  // The deadline covers resolving too: closing the socket ends the connect; a resolve past it
  // only finds the flag set.
  deadline.async_wait([socket, expired](asio::error_code ec) {
    if (ec) return;
    *expired = true;
    asio::error_code ignored;
    socket->close(ignored);
  });
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(executor);
  auto endpoints = co_await resolver.async_resolve(host, std::to_string(port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (!ec && !*expired)
    co_await asio::async_connect(*socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
  deadline.cancel();
  const bool reached = !ec && !*expired;
  asio::error_code ignored;
  socket->close(ignored);
  done(reached);
}

}  // namespace

void probe_reachable(const asio::any_io_executor& executor, const std::string& host, uint16_t port,
                     std::chrono::milliseconds timeout, std::function<void(bool)> done) {
  asio::co_spawn(executor, probe(executor, host, port, timeout, std::move(done)), asio::detached);
}

}  // namespace longhaul::master
