#include "wanem/connection.hpp"

#include <algorithm>

#include <asio/buffer.hpp>
#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "common/log.hpp"

namespace longhaul::wanem {
namespace {

constexpr auto kAwait = asio::use_awaitable;
using Clock = DelayModel::Clock;

// Bytes read but not yet delivered, per direction. Bounds memory; a full queue stops reading, so
// the sender sees TCP back-pressure as it would from a real path. 8 MiB carries 1.6 Gbit/s at
// 40 ms one-way.
constexpr size_t kMaxQueuedBytes = 8 * 1024 * 1024;

void set_no_delay(asio::ip::tcp::socket& s) {
  asio::error_code ec;
  s.set_option(asio::ip::tcp::no_delay(true), ec);  // best effort: the emulator adds the delays
}

void abort_socket(asio::ip::tcp::socket& s) {
  asio::error_code ec;
  if (!s.is_open()) return;
  s.set_option(asio::socket_base::linger(true, 0), ec);  // close() then sends RST, not FIN
  s.close(ec);
}

double mbit_to_bytes_per_second(double mbit) {
  return mbit * 1e6 / 8;
}

}  // namespace

// GCC 12 can destroy temporaries inside a co_await operand twice, so every awaited call below
// takes named locals (or trivially destructible values) only.

Connection::Connection(std::shared_ptr<RouteState> route, uint64_t id, asio::ip::tcp::socket client)
    : route_(std::move(route)),
      id_(id),
      client_(std::move(client)),
      target_(client_.get_executor()) {
  const auto ex = client_.get_executor();
  for (int dir : {kUp, kDown})
    flows_[dir] = std::make_unique<Flow>(ex, mix64(route_->seed ^ mix64(id_ * 2 + dir)));
  flows_[kUp]->from = &client_;
  flows_[kUp]->to = &target_;
  flows_[kDown]->from = &target_;
  flows_[kDown]->to = &client_;
}

Connection::~Connection() {
  asio::error_code ec;
  client_.close(ec);
  target_.close(ec);
}

void Connection::start() {
  route_->connections[id_] = shared_from_this();
  auto self = shared_from_this();
  asio::co_spawn(client_.get_executor(), establish(self), asio::detached);
}

void Connection::reset() {
  end(true);
}
void Connection::close() {
  end(false);
}

void Connection::end(bool abort) {
  if (ended_) return;
  ended_ = true;
  if (abort) {
    abort_socket(client_);
    abort_socket(target_);
  } else {
    asio::error_code ec;
    client_.close(ec);
    target_.close(ec);
  }
  for (auto& flow : flows_) {
    flow->pace.cancel();
    flow->data.notify_all();
    flow->space.notify_all();
  }
  route_->changed.notify_all();  // wakes this connection if it waits for a target or a heal
  route_->connections.erase(id_);
}

asio::awaitable<bool> Connection::sleep_until(Flow& flow, Clock::time_point when) {
  if (when <= Clock::now()) co_return !ended_;
  flow.pace.expires_at(when);
  asio::error_code ec;
  co_await flow.pace.async_wait(asio::redirect_error(kAwait, ec));
  co_return !ended_;
}

asio::awaitable<bool> Connection::wait_while_blackholed() {
  while (route_->blackholed && !ended_) co_await route_->changed.wait();
  co_return !ended_;
}

asio::awaitable<void> Connection::establish(std::shared_ptr<Connection> self) {
  // A target not known yet is waited for up to the route's timeout; a black-holed path holds the
  // new connection (silently, like the packets of a real one) until heal.
  const Clock::time_point deadline = Clock::now() + route_->target_timeout;
  while (!ended_ && (!route_->target || route_->blackholed)) {
    if (!route_->target && Clock::now() >= deadline) {
      log::warn("wanem", "route {}: no target within {} ms; resetting the client", route_->name,
                route_->target_timeout.count());
      end(true);
      co_return;
    }
    const Clock::time_point until = route_->target ? Clock::time_point::max() : deadline;
    co_await route_->changed.wait(until);
  }
  if (ended_) co_return;

  const HostPort target = *route_->target;
  const std::string host = target.host;
  const std::string service = std::to_string(target.port);
  asio::ip::tcp::resolver resolver(target_.get_executor());
  asio::error_code ec;
  auto endpoints = co_await resolver.async_resolve(host, service, asio::redirect_error(kAwait, ec));
  if (!ec && !ended_)
    co_await asio::async_connect(target_, endpoints, asio::redirect_error(kAwait, ec));
  if (ended_) co_return;
  if (ec) {
    log::warn("wanem", "route {}: cannot connect to {}: {}; resetting the client", route_->name,
              target.to_string(), ec.message());
    end(true);
    co_return;
  }
  set_no_delay(client_);
  set_no_delay(target_);
  log::debug("wanem", "route {}: connection {} forwarded to {}", route_->name, id_,
             target.to_string());
  const auto ex = client_.get_executor();
  for (Direction dir : {kUp, kDown}) {
    asio::co_spawn(ex, read_loop(self, dir), asio::detached);
    asio::co_spawn(ex, write_loop(self, dir), asio::detached);
  }
}

asio::awaitable<void> Connection::read_loop(std::shared_ptr<Connection> /*keeps this alive*/,
                                            Direction dir) {
  Flow& flow = *flows_[dir];
  for (;;) {
    while (flow.queued_bytes >= kMaxQueuedBytes && !ended_) co_await flow.space.wait();
    // A black hole stops reading too: the sender's kernel buffers fill and it sees a silent path.
    if (!co_await wait_while_blackholed()) co_return;
    asio::error_code ec;
    const asio::mutable_buffer buf(flow.read_buffer.data(), flow.read_buffer.size());
    const size_t n = co_await flow.from->async_read_some(buf, asio::redirect_error(kAwait, ec));
    if (ended_) co_return;
    if (ec == asio::error::eof) {
      flow.eof = true;
      flow.data.notify_all();
      co_return;
    }
    if (ec) {
      // The endpoint reset or failed: pass the abrupt end on to the other side.
      log::debug("wanem", "route {}: connection {}: {}; resetting", route_->name, id_,
                 ec.message());
      end(true);
      co_return;
    }
    Chunk chunk;
    chunk.bytes.assign(flow.read_buffer.data(), flow.read_buffer.data() + n);
    chunk.release = flow.delay.release_time(Clock::now(), route_->shape);
    flow.queued_bytes += n;
    flow.queue.push_back(std::move(chunk));
    flow.data.notify_all();
  }
}

asio::awaitable<void> Connection::write_loop(std::shared_ptr<Connection> /*keeps this alive*/,
                                             Direction dir) {
  Flow& flow = *flows_[dir];
  RateLimiter& path_limit = route_->path_limit[dir];
  for (;;) {
    while (flow.queue.empty() && !flow.eof && !ended_) co_await flow.data.wait();
    if (ended_) co_return;
    if (flow.queue.empty()) {
      // Everything before the FIN is delivered: forward the half-close.
      asio::error_code ec;
      flow.to->shutdown(asio::ip::tcp::socket::shutdown_send, ec);
      flow.done = true;
      if (flows_[kUp]->done && flows_[kDown]->done) end(false);
      co_return;
    }
    Chunk& chunk = flow.queue.front();
    if (!co_await sleep_until(flow, chunk.release)) co_return;
    size_t offset = 0;
    while (offset < chunk.bytes.size()) {
      if (!co_await wait_while_blackholed()) co_return;
      flow.conn_limit.set_rate(mbit_to_bytes_per_second(route_->shape.conn_rate_mbit));
      path_limit.set_rate(mbit_to_bytes_per_second(route_->shape.rate_mbit));
      const size_t piece = std::min(
          {chunk.bytes.size() - offset, flow.conn_limit.piece_bytes(), path_limit.piece_bytes()});
      // The connection's own cap first, then the shared one: a connection only queues for the
      // path when it may send, so the path's reservations go round-robin between connections.
      const Clock::time_point conn_ok = flow.conn_limit.reserve(piece, Clock::now());
      if (!co_await sleep_until(flow, conn_ok)) co_return;
      const Clock::time_point path_ok = path_limit.reserve(piece, Clock::now());
      if (!co_await sleep_until(flow, path_ok)) co_return;
      asio::error_code ec;
      const asio::const_buffer buf(chunk.bytes.data() + offset, piece);
      co_await asio::async_write(*flow.to, buf, asio::redirect_error(kAwait, ec));
      if (ended_) co_return;
      if (ec) {
        log::debug("wanem", "route {}: connection {}: {}; resetting", route_->name, id_,
                   ec.message());
        end(true);
        co_return;
      }
      offset += piece;
      route_->delivered_bytes[dir] += piece;
    }
    flow.queued_bytes -= chunk.bytes.size();
    flow.queue.pop_front();
    flow.space.notify_all();
  }
}

}  // namespace longhaul::wanem
