#include "wanem/route.hpp"

#include <vector>

#include <fmt/format.h>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "common/log.hpp"
#include "wanem/connection.hpp"

namespace longhaul::wanem {
namespace {

std::vector<std::shared_ptr<Connection>> snapshot(const RouteState& state) {
  std::vector<std::shared_ptr<Connection>> all;
  for (const auto& [id, conn] : state.connections) all.push_back(conn);
  return all;  // ending a connection erases it from the map, so iterate over a copy
}

}  // namespace

Result<std::shared_ptr<Route>> Route::create(asio::io_context& io, const RouteSpec& spec,
                                             uint64_t seed,
                                             std::chrono::milliseconds target_timeout) {
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(spec.listen.host, std::to_string(spec.listen.port), ec);
  if (ec || endpoints.empty())
    return invalid_argument(fmt::format("route {}: cannot resolve listen address {}: {}", spec.name,
                                        spec.listen.to_string(), ec ? ec.message() : "no address"));
  const asio::ip::tcp::endpoint ep = endpoints.begin()->endpoint();
  asio::ip::tcp::acceptor acceptor(io);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return io_error(fmt::format("route {}: cannot listen on {}: {}", spec.name,
                                spec.listen.to_string(), ec.message()));
  auto state = std::make_shared<RouteState>(io.get_executor());
  state->name = spec.name;
  state->shape = spec.shape;
  state->target = spec.target;
  state->seed = mix64(seed);
  for (char c : spec.name) state->seed = mix64(state->seed ^ static_cast<unsigned char>(c));
  state->target_timeout = target_timeout;
  return std::shared_ptr<Route>(new Route(io, std::move(acceptor), std::move(state)));
}

Route::Route(asio::io_context&, asio::ip::tcp::acceptor acceptor, std::shared_ptr<RouteState> state)
    : acceptor_(std::move(acceptor)), state_(std::move(state)) {
  asio::error_code ec;
  port_ = acceptor_.local_endpoint(ec).port();
}

void Route::start() {
  auto self = shared_from_this();
  asio::co_spawn(acceptor_.get_executor(), accept_loop(self), asio::detached);
}

asio::awaitable<void> Route::accept_loop(std::shared_ptr<Route> /*keeps this alive*/) {
  for (;;) {
    asio::error_code ec;
    asio::ip::tcp::socket socket =
        co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (closed_) co_return;
    if (ec) {
      // Out of descriptors and the like: say so and back off instead of spinning on the error.
      log::warn("wanem", "route {}: accept failed: {}", state_->name, ec.message());
      asio::steady_timer backoff(acceptor_.get_executor(), std::chrono::milliseconds(100));
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    const uint64_t id = ++state_->accepted;
    auto conn = std::make_shared<Connection>(state_, id, std::move(socket));
    conn->start();
  }
}

void Route::close() {
  closed_ = true;
  asio::error_code ec;
  acceptor_.close(ec);
  for (auto& conn : snapshot(*state_)) conn->close();
}

void Route::set_target(HostPort target) {
  state_->target = std::move(target);
  state_->changed.notify_all();
}

size_t Route::reset() {
  auto all = snapshot(*state_);
  for (auto& conn : all) conn->reset();
  return all.size();
}

void Route::blackhole() {
  state_->blackholed = true;
}

void Route::heal() {
  state_->blackholed = false;
  state_->changed.notify_all();
}

Status Route::set(std::string_view key, std::string_view value) {
  return set_shape_field(&state_->shape, key, value);
}

RouteStats Route::stats() const {
  RouteStats s;
  s.accepted = state_->accepted;
  s.open = state_->connections.size();
  s.up_bytes = state_->delivered_bytes[kUp];
  s.down_bytes = state_->delivered_bytes[kDown];
  s.blackholed = state_->blackholed;
  return s;
}

}  // namespace longhaul::wanem
