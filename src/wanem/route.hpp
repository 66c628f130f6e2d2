// A route: a listening socket whose accepted connections are forwarded to the route's target
// through an emulated WAN path, plus the faults that can be inflicted on that path.
// All methods must be called on the io_context's (single) thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include "common/status.hpp"
#include "wanem/route_spec.hpp"
#include "wanem/route_state.hpp"

namespace longhaul::wanem {

struct RouteStats {
  uint64_t accepted = 0;    // connections accepted since the route was created
  uint64_t open = 0;        // connections forwarding or waiting for a target now
  uint64_t up_bytes = 0;    // delivered client → target
  uint64_t down_bytes = 0;  // delivered target → client
  bool blackholed = false;
};

class Route : public std::enable_shared_from_this<Route> {
 public:
  // Binds spec.listen (port 0: ephemeral). `seed` makes the jitter reproducible; a connection
  // still waiting for a target after `target_timeout` is reset.
  static Result<std::shared_ptr<Route>> create(asio::io_context& io, const RouteSpec& spec,
                                               uint64_t seed,
                                               std::chrono::milliseconds target_timeout);
  // Starts accepting.
  void start();
  // Stops accepting and closes every connection in order (emulator shutdown).
  void close();

  const std::string& name() const { return state_->name; }
  uint16_t port() const { return port_; }
  const LinkShape& shape() const { return state_->shape; }
  const std::optional<HostPort>& target() const { return state_->target; }

  // New connections go to `target`; connections already forwarded keep theirs; connections waiting
  // for a target proceed.
  void set_target(HostPort target);
  // RSTs every connection of the route (both sides); returns how many. The route keeps accepting.
  size_t reset();
  // Stops all forwarding without closing anything: bytes are held (not delivered, not lost) and
  // new connections are accepted but not forwarded, until heal().
  void blackhole();
  void heal();
  // Changes one shape field (see set_shape_field); applies to bytes read from now on.
  Status set(std::string_view key, std::string_view value);
  RouteStats stats() const;

 private:
  Route(asio::io_context& io, asio::ip::tcp::acceptor acceptor, std::shared_ptr<RouteState> state);
  asio::awaitable<void> accept_loop(std::shared_ptr<Route> self);

  asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<RouteState> state_;
  uint16_t port_ = 0;
  bool closed_ = false;
};

}  // namespace longhaul::wanem
