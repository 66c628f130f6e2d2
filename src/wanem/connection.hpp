// One proxied TCP connection: the client's socket, the socket to the route's target, and a flow in
// each direction that reads chunks, holds each until its delivery time (latency, jitter), paces
// them through the connection's and the route's rate caps, and writes them on, in order.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "wanem/delay_model.hpp"
#include "wanem/notifier.hpp"
#include "wanem/rate_limiter.hpp"
#include "wanem/route_state.hpp"

namespace longhaul::wanem {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // The connection registers itself in route->connections on start() and removes itself when it
  // ends.
  Connection(std::shared_ptr<RouteState> route, uint64_t id, asio::ip::tcp::socket client);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Waits for the route's target (up to its target timeout) and a healed path, connects, and
  // starts forwarding.
  void start();
  // Abrupt reset: both sockets are closed with SO_LINGER 0, so both endpoints get an RST and
  // bytes held in the emulator are discarded.
  void reset();
  // Orderly close of both sockets (emulator shutdown).
  void close();

 private:
  struct Chunk {
    std::vector<char> bytes;
    DelayModel::Clock::time_point release;
  };
  // One direction: read from `from`, deliver to `to`.
  struct Flow {
    Flow(asio::any_io_executor ex, uint64_t seed) : data(ex), space(ex), pace(ex), delay(seed) {}
    asio::ip::tcp::socket* from = nullptr;
    asio::ip::tcp::socket* to = nullptr;
    std::deque<Chunk> queue;
    size_t queued_bytes = 0;
    bool eof = false;         // `from` closed its sending side; forward the FIN after the queue
    bool done = false;        // FIN forwarded
    Notifier data;            // a chunk was queued or the flow ended
    Notifier space;           // the queue shrank or the flow ended
    asio::steady_timer pace;  // waits for delivery times and rate caps
    DelayModel delay;
    RateLimiter conn_limit;
    std::array<char, 64 * 1024> read_buffer{};
  };

  asio::awaitable<void> establish(std::shared_ptr<Connection> self);
  asio::awaitable<void> read_loop(std::shared_ptr<Connection> self, Direction dir);
  asio::awaitable<void> write_loop(std::shared_ptr<Connection> self, Direction dir);
  // Sleeps until `when` on the flow's timer; false when the connection ended meanwhile.
  asio::awaitable<bool> sleep_until(Flow& flow, DelayModel::Clock::time_point when);
  // Waits while the route is black-holed; false when the connection ended meanwhile.
  asio::awaitable<bool> wait_while_blackholed();
  // Ends the connection once; `abort` resets both sides, otherwise closes them in order.
  void end(bool abort);

  std::shared_ptr<RouteState> route_;
  uint64_t id_;
  asio::ip::tcp::socket client_;
  asio::ip::tcp::socket target_;
  std::array<std::unique_ptr<Flow>, 2> flows_;
  bool ended_ = false;
};

}  // namespace longhaul::wanem
