// Listening for links and connecting them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <asio/ip/tcp.hpp>
#include <asio/ssl/context.hpp>
#include <asio/steady_timer.hpp>

#include "common/host_port.hpp"
#include "common/mutex.hpp"
#include "common/status.hpp"
#include "net/handshake_flow.hpp"
#include "net/handshake_slots.hpp"
#include "net/link.hpp"
#include "net/options.hpp"
#include "runtime/io_runtime.hpp"

namespace longhaul::net {

// "host:port", "[v6]:port" → host and port. Port 0 is allowed (ephemeral, for listeners).
using longhaul::parse_host_port;  // common/host_port.hpp

// Accepts connections, runs the server handshake on each, and hands out a Link once all K
// connections of a client's link have arrived. Refused connections (bad secret, wrong version,
// garbage, silence past the handshake timeout) are logged with their reason and dropped; the
// listener carries on.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // The link has not been started; the handler must call start() on it.
  using AcceptHandler = std::function<void(std::shared_ptr<Link> link, Role role)>;

  // Binds host:port (port 0 = ephemeral; host may be an IPv4 or IPv6 literal or a name).
  static Result<std::shared_ptr<Listener>> create(runtime::IoRuntime& io, const std::string& host,
                                                  uint16_t port, const TransportOptions& options);
  ~Listener();
  void start(AcceptHandler on_link);
  // Stops accepting and drops half-assembled links. When it returns no accept handler is running
  // or will run (it may be called from inside the handler).
  void close();

  uint16_t port() const { return port_; }
  // How many connections were refused so far (for tests and metrics).
  uint64_t refused_count() const { return refused_.load(); }
  // Connections in their handshake now, and how many were dropped to make room so far.
  size_t handshaking_count() const { return handshakes_.size(); }
  uint64_t shed_count() const { return handshakes_.shed_count(); }

 private:
  struct PendingLink {
    Role role = Role::kPeer;
    std::vector<std::shared_ptr<Connection>> connections;
    size_t arrived = 0;
    std::unique_ptr<asio::steady_timer> deadline;
  };
  Listener(runtime::IoRuntime& io, asio::ip::tcp::acceptor acceptor,
           const TransportOptions& options, std::shared_ptr<asio::ssl::context> tls);
  asio::awaitable<void> accept_loop();
  // After a failed accept: out of descriptors, drop the oldest unauthenticated connection, wait a
  // little longer each time in a row (10 ms .. 1 s) and log once per interval, not per failure.
  asio::awaitable<void> back_off(const asio::error_code& ec);
  asio::awaitable<void> admit(std::shared_ptr<Connection> conn, uint64_t slot);
  // A connection over its address's cap: a REJECT with the reason (kRetryLaterCode), then close.
  void refuse_for_now(std::shared_ptr<Connection> conn, const std::string& address);
  asio::awaitable<void> tell_refusal(std::shared_ptr<Connection> conn, Status why);
  static constexpr int kMaxRefusalsInFlight = 16;
  static constexpr std::chrono::milliseconds kRefusalDeadline{1000};
  void add_to_link(std::shared_ptr<Connection> conn, const AdmittedConnection& who);

  runtime::IoRuntime& io_;
  asio::ip::tcp::acceptor acceptor_;
  TransportOptions options_;
  std::shared_ptr<asio::ssl::context> tls_;
  uint16_t port_ = 0;
  std::atomic<uint64_t> refused_{0};
  std::atomic<int> refusing_{0};  // refusals still being told to their client
  HandshakeSlots handshakes_;
  std::chrono::milliseconds accept_backoff_{0};  // accept loop's strand only
  std::chrono::steady_clock::time_point last_accept_warning_{};
  uint64_t accept_failures_unlogged_ = 0;
  Mutex mu_;
  RecursiveMutex handler_mu_;  // held while the accept handler runs; close() waits on it
  AcceptHandler on_link_ GUARDED_BY(mu_);
  std::map<uint64_t, PendingLink> pending_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

// Opens K connections to host:port in parallel, handshakes each, and completes with a Link (not
// yet started) or the first error. `done` runs on an I/O thread.
void async_connect_link(runtime::IoRuntime& io, const std::string& host, uint16_t port,
                        uint16_t connections, const TransportOptions& options,
                        std::function<void(Result<std::shared_ptr<Link>>)> done);
// Blocking form; must not be called from one of io's threads.
Result<std::shared_ptr<Link>> connect_link(runtime::IoRuntime& io, const std::string& host,
                                           uint16_t port, uint16_t connections,
                                           const TransportOptions& options);

}  // namespace longhaul::net
