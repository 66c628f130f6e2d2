#include "net/endpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <future>

#include <fmt/format.h>
#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "common/log.hpp"
#include "net/socket_tuning.hpp"
#include "net/tls_context.hpp"

namespace longhaul::net {

// ---------------------------------------------------------------------------------------------
// Listener

Result<std::shared_ptr<Listener>> Listener::create(runtime::IoRuntime& io, const std::string& host,
                                                   uint16_t port, const TransportOptions& options) {
  std::shared_ptr<asio::ssl::context> tls;
  if (options.tls.enabled) {
    auto ctx = make_server_tls_context(options.tls);
    if (!ctx) return ctx.status();
    tls = *ctx;
  }
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(io.context());
  auto results = resolver.resolve(host, std::to_string(port), asio::ip::resolver_base::passive, ec);
  if (ec || results.empty())
    return io_error(fmt::format("cannot resolve listen address '{}': {}", host, ec.message()));
  asio::ip::tcp::endpoint endpoint = *results.begin();
  asio::ip::tcp::acceptor acceptor(asio::make_strand(io.context()));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return io_error(fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  return std::shared_ptr<Listener>(new Listener(io, std::move(acceptor), options, std::move(tls)));
}

Listener::Listener(runtime::IoRuntime& io, asio::ip::tcp::acceptor acceptor,
                   const TransportOptions& options, std::shared_ptr<asio::ssl::context> tls)
    : io_(io),
      acceptor_(std::move(acceptor)),
      options_(options),
      tls_(std::move(tls)),
      handshakes_(options.max_unauthenticated, options.max_unauthenticated_per_address,
                  options.unauthenticated_grace) {
  port_ = acceptor_.local_endpoint().port();
}

Listener::~Listener() {
  close();
}

void Listener::start(AcceptHandler on_link) {
  {
    MutexLock lock(mu_);
    on_link_ = std::move(on_link);
  }
  asio::co_spawn(
      acceptor_.get_executor(), [self = shared_from_this()] { return self->accept_loop(); },
      asio::detached);
}

void Listener::close() {
  std::map<uint64_t, PendingLink> pending;
  {
    MutexLock lock(mu_);
    if (closed_) return;
    closed_ = true;
    pending.swap(pending_);
    on_link_ = nullptr;
  }
  for (auto& [id, p] : pending)
    for (auto& c : p.connections)
      if (c) c->close();
  { RecursiveMutexLock wait_for_handler(handler_mu_); }
  asio::post(acceptor_.get_executor(), [this, keep = weak_from_this()] {
    auto self = keep.lock();
    asio::error_code ec;
    if (self) acceptor_.close(ec);
  });
}

asio::awaitable<void> Listener::accept_loop() {
  for (;;) {
    asio::error_code ec;
    asio::ip::tcp::socket socket(
        asio::make_strand(io_.context()));  // each connection gets its own strand
    co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    {
      MutexLock lock(mu_);
      if (closed_) co_return;
    }
    if (ec) {
      if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
      co_await back_off(ec);
      continue;
    }
    accept_backoff_ = std::chrono::milliseconds(0);
    if (Status s = tune_socket(socket, options_.socket); !s) {
      log::warn("net", "dropping accepted connection: {}", s.to_string());
      continue;
    }
    asio::error_code peer_ec;
    const std::string address = socket.remote_endpoint(peer_ec).address().to_string();
    auto conn = std::make_shared<Connection>(std::move(socket), tls_, true, options_.limits);
    const uint64_t slot = handshakes_.take(conn, address);
    if (slot == 0) {
      ++refused_;
      refuse_for_now(std::move(conn), address);
      continue;
    }
    asio::co_spawn(
        conn->strand(), [self = shared_from_this(), conn, slot] { return self->admit(conn, slot); },
        asio::detached);
  }
}

void Listener::refuse_for_now(std::shared_ptr<Connection> conn, const std::string& address) {
  // Telling the client why costs a write (and on TLS a TLS handshake), so only a few refusals are
  // answered at once; beyond them the connection is closed without a reason.
  if (refusing_.fetch_add(1) >= kMaxRefusalsInFlight) {
    --refusing_;
    conn->close();
    return;
  }
  const Status why(kRetryLaterCode,
                   fmt::format("{} connections from {} are already in their handshake; retry "
                               "shortly",
                               options_.max_unauthenticated_per_address, address));
  asio::co_spawn(
      conn->strand(),
      [self = shared_from_this(), conn, why] { return self->tell_refusal(conn, why); },
      asio::detached);
}

asio::awaitable<void> Listener::tell_refusal(std::shared_ptr<Connection> conn, Status why) {
  asio::steady_timer deadline(conn->strand(), kRefusalDeadline);
  deadline.async_wait([conn](asio::error_code ec) {
    if (!ec) conn->close();
  });
  co_await refuse_handshake(*conn, why);
  deadline.cancel();
  conn->close();
  --refusing_;
}

asio::awaitable<void> Listener::back_off(const asio::error_code& ec) {
  using namespace std::chrono_literals;
  const bool out_of_descriptors = ec == asio::error::no_descriptors || ec.value() == ENFILE ||
                                  ec == asio::error::no_buffer_space ||
                                  ec == asio::error::no_memory;
  if (out_of_descriptors) handshakes_.shed_oldest();
  accept_backoff_ = std::clamp(accept_backoff_ * 2, 10ms, 1000ms);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_accept_warning_ >= 5s) {
    log::warn(
        "net", "accept failed: {}{}; retrying in {} ms", ec.message(),
        accept_failures_unlogged_ > 0
            ? fmt::format(" ({} more failures since the last warning)", accept_failures_unlogged_)
            : "",
        accept_backoff_.count());
    last_accept_warning_ = now;
    accept_failures_unlogged_ = 0;
  } else {
    ++accept_failures_unlogged_;
  }
  asio::steady_timer pause(acceptor_.get_executor(), accept_backoff_);
  asio::error_code ignored;
  co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

asio::awaitable<void> Listener::admit(std::shared_ptr<Connection> conn, uint64_t slot) {
  auto timed_out = std::make_shared<bool>(false);
  asio::steady_timer deadline(conn->strand(), options_.handshake_timeout);
  deadline.async_wait([conn, timed_out](asio::error_code ec) {
    if (ec) return;
    *timed_out = true;
    conn->close();
  });
  auto who = co_await server_handshake(*conn, options_);
  deadline.cancel();
  handshakes_.release(slot);
  if (!who && !*timed_out && conn->closed_between_frames()) {
    // Closed before a single byte: the master's reachability probe of a newcomer
    // (master/reach_probe.hpp), or a port scan. Nothing was refused; not worth a warning.
    ++refused_;
    log::info("net", "connection from {} closed before its handshake", conn->remote());
    conn->close();
    co_return;
  }
  if (!who) {
    ++refused_;
    log::warn("net", "refused connection from {}: {}", conn->remote(),
              *timed_out ? fmt::format("no complete handshake within {} ms",
                                       options_.handshake_timeout.count())
                         : who.status().to_string());
    conn->close();
    co_return;
  }
  add_to_link(std::move(conn), *who);
}

void Listener::add_to_link(std::shared_ptr<Connection> conn, const AdmittedConnection& who) {
  std::shared_ptr<Link> link;
  AcceptHandler handler;
  Role role = who.role;
  {
    MutexLock lock(mu_);
    if (closed_) {
      conn->close();
      return;
    }
    auto [it, fresh] = pending_.try_emplace(who.link_id);
    PendingLink& p = it->second;
    if (fresh) {
      p.role = who.role;
      p.connections.resize(who.connection_count);
      p.deadline = std::make_unique<asio::steady_timer>(io_.context(), options_.handshake_timeout);
      p.deadline->async_wait([weak = weak_from_this(), id = who.link_id](asio::error_code ec) {
        auto self = weak.lock();
        if (ec || !self) return;
        MutexLock relock(self->mu_);
        auto stale = self->pending_.find(id);
        if (stale == self->pending_.end()) return;
        log::warn("net", "dropping link {:016x}: only {} of {} connections arrived in time", id,
                  stale->second.arrived, stale->second.connections.size());
        for (auto& c : stale->second.connections)
          if (c) c->close();
        self->refused_ += stale->second.arrived;
        self->pending_.erase(stale);
      });
    }
    if (p.connections.size() != who.connection_count || p.connections[who.connection_index] ||
        p.role != who.role) {
      ++refused_;
      log::warn(
          "net",
          "refused connection from {}: inconsistent with the other connections of link {:016x}",
          conn->remote(), who.link_id);
      conn->close();
      return;
    }
    p.connections[who.connection_index] = conn;
    if (++p.arrived < p.connections.size()) return;
    if (Status s = cap_link_rate(p.connections, options_.link_rate_bytes_per_s); !s) {
      ++refused_;
      log::warn("net", "refused link {:016x} from {}: {}", who.link_id, conn->remote(),
                s.message());
      for (auto& c : p.connections) c->close();
      pending_.erase(it);
      return;
    }
    link = Link::create(std::move(p.connections), options_, conn->remote());
    pending_.erase(it);
    handler = on_link_;
  }
  RecursiveMutexLock handler_lock(handler_mu_);
  bool closed;
  {
    MutexLock lock(mu_);
    closed = closed_;
  }
  if (handler && !closed)
    handler(std::move(link), role);
  else
    link->close();
}

// ---------------------------------------------------------------------------------------------
// Connecting

namespace {

struct ConnectAttempt {
  Mutex mu;
  std::vector<std::shared_ptr<Connection>> connections GUARDED_BY(mu);
  size_t remaining GUARDED_BY(mu) = 0;
  Status error GUARDED_BY(mu);
  std::string peer;
  TransportOptions options;
  std::function<void(Result<std::shared_ptr<Link>>)> done GUARDED_BY(mu);

  void finish_one(size_t index, Result<std::shared_ptr<Connection>> result) {
    std::function<void(Result<std::shared_ptr<Link>>)> callback;
    Result<std::shared_ptr<Link>> outcome = internal_error("unset");
    {
      MutexLock lock(mu);
      if (result)
        connections[index] = *result;
      else if (error.is_ok())
        error = result.status();
      if (--remaining > 0) return;
      callback = std::move(done);
      if (error.is_ok()) error = cap_link_rate(connections, options.link_rate_bytes_per_s);
      if (error.is_ok()) {
        outcome = Link::create(std::move(connections), options, peer);
      } else {
        for (auto& c : connections)
          if (c) c->close();
        outcome = error;
      }
    }
    callback(std::move(outcome));
  }
};

// Reference parameters are safe: the only caller, connect_one, awaits this and owns the objects.
asio::awaitable<Result<std::shared_ptr<Connection>>> connect_and_handshake(
    const asio::ip::tcp::resolver::results_type& endpoints, ConnectAttempt* attempt,
    const std::shared_ptr<asio::ssl::context>& tls, uint64_t link_id, uint16_t index,
    uint16_t count) {
  const TransportOptions& options = attempt->options;
  auto executor = co_await asio::this_coro::executor;  // a strand of its own
  asio::ip::tcp::socket socket(executor);
  // The deadline covers connecting and the handshake, so an unreachable or silent host fails in
  // bounded time.
  struct Guard {
    asio::ip::tcp::socket* socket;
    std::shared_ptr<Connection> conn;
    bool expired = false;
  };
  auto guard = std::make_shared<Guard>(Guard{&socket, nullptr});
  asio::steady_timer deadline(executor, options.handshake_timeout);
  deadline.async_wait([guard](asio::error_code ec) {
    if (ec) return;
    guard->expired = true;
    asio::error_code ignored;
    if (guard->conn)
      guard->conn->close();
    else if (guard->socket)
      guard->socket->close(ignored);
  });
  auto timeout = [&] {
    return timeout_error(fmt::format("connecting to {} took longer than {} ms", attempt->peer,
                                     options.handshake_timeout.count()));
  };
  asio::error_code ec;
  co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec || guard->expired) {
    deadline.cancel();
    if (guard->expired) co_return timeout();
    co_return peer_lost(fmt::format("cannot connect to {}: {}", attempt->peer, ec.message()));
  }
  if (Status s = tune_socket(socket, options.socket); !s) co_return s;
  auto conn = std::make_shared<Connection>(std::move(socket), tls, false, options.limits);
  guard->socket = nullptr;
  guard->conn = conn;
  Status s = co_await client_handshake(*conn, options, link_id, index, count);
  deadline.cancel();
  if (guard->expired) co_return timeout();
  if (!s) {
    conn->close();
    co_return s;
  }
  co_return conn;
}

asio::awaitable<void> connect_one(asio::ip::tcp::resolver::results_type endpoints,
                                  std::shared_ptr<ConnectAttempt> attempt,
                                  std::shared_ptr<asio::ssl::context> tls, uint64_t link_id,
                                  uint16_t index, uint16_t count) {
  auto result =
      co_await connect_and_handshake(endpoints, attempt.get(), tls, link_id, index, count);
  attempt->finish_one(index, std::move(result));
}

}  // namespace

void async_connect_link(runtime::IoRuntime& io, const std::string& host, uint16_t port,
                        uint16_t connections, const TransportOptions& options,
                        std::function<void(Result<std::shared_ptr<Link>>)> done) {
  if (connections == 0 || connections > kMaxConnectionsPerLink) {
    done(invalid_argument(fmt::format("connections per link must be 1..{}, got {}",
                                      kMaxConnectionsPerLink, connections)));
    return;
  }
  std::shared_ptr<asio::ssl::context> tls;
  if (options.tls.enabled) {
    auto ctx = make_client_tls_context(options.tls);
    if (!ctx) {
      done(ctx.status());
      return;
    }
    tls = *ctx;
  }
  auto attempt = std::make_shared<ConnectAttempt>();
  attempt->peer = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                                      : fmt::format("{}:{}", host, port);
  attempt->options = options;
  {
    MutexLock lock(attempt->mu);  // not shared yet; the lock states what guards these fields
    attempt->connections.resize(connections);
    attempt->remaining = connections;
    attempt->done = std::move(done);
  }
  asio::co_spawn(
      io.context(),
      [&io, host, port, attempt, tls, connections]() -> asio::awaitable<void> {
        asio::ip::tcp::resolver resolver(co_await asio::this_coro::executor);
        asio::error_code ec;
        auto endpoints = co_await resolver.async_resolve(
            host, std::to_string(port), asio::redirect_error(asio::use_awaitable, ec));
        if (ec || endpoints.empty()) {
          std::function<void(Result<std::shared_ptr<Link>>)> callback;
          {
            MutexLock lock(attempt->mu);  // no connection was started: nobody else takes it
            callback = std::move(attempt->done);
          }
          callback(io_error(fmt::format("cannot resolve '{}': {}", host, ec.message())));
          co_return;
        }
        const uint64_t link_id = random_u64();
        for (uint16_t i = 0; i < connections; ++i) {
          asio::co_spawn(asio::make_strand(io.context()),
                         connect_one(endpoints, attempt, tls, link_id, i, connections),
                         asio::detached);
        }
      },
      asio::detached);
}

Result<std::shared_ptr<Link>> connect_link(runtime::IoRuntime& io, const std::string& host,
                                           uint16_t port, uint16_t connections,
                                           const TransportOptions& options) {
  if (io.in_runtime_thread())
    return internal_error("connect_link would block an I/O thread; use async_connect_link");
  std::promise<Result<std::shared_ptr<Link>>> promise;
  auto future = promise.get_future();
  async_connect_link(
      io, host, port, connections, options,
      [&promise](Result<std::shared_ptr<Link>> r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace longhaul::net
