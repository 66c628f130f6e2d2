// One TCP connection, plaintext or TLS 1.3, carrying frames.
//
// Every operation below must run on the connection's strand (coroutines spawned on it), and at
// most one read and one write may be outstanding at a time; the Link and the handshake arrange
// that. close() may be called from any thread; it makes every pending operation finish with an
// error promptly.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ssl/context.hpp>
#include <asio/strand.hpp>

#include "common/status.hpp"
#include "net/frame.hpp"
#include "net/tcp_stats.hpp"
#include "net/tls_stream.hpp"

namespace longhaul::net {

// A connection's executor: always a strand (sockets are created on one), so every handler of one
// connection runs serialised.
using Strand = asio::any_io_executor;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `socket` is connected and tuned, and its executor is a strand; a non-null `tls` makes this a
  // TLS connection (not yet handshaken: call tls_handshake first).
  Connection(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls, bool is_server,
             FrameLimits limits);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const Strand& strand() const { return strand_; }
  bool is_tls() const { return tls_ != nullptr; }
  const std::string& remote() const { return remote_; }
  const FrameLimits& limits() const { return limits_; }

  asio::awaitable<Status> tls_handshake();
  // Reads and validates one frame header.
  asio::awaitable<Result<FrameHeader>> read_header();
  // Reads exactly dst.size() payload bytes straight into dst.
  asio::awaitable<Status> read_payload(std::span<std::byte> dst);
  // Reads and discards n payload bytes.
  asio::awaitable<Status> skip_payload(uint64_t n);
  // Writes a header and its payload (header.length must equal payload.size()) as one gathered
  // write; completes once the kernel has every byte.
  asio::awaitable<Status> write_frame(const FrameHeader& header,
                                      std::span<const std::byte> payload);

  // TLS exported keying material (RFC 5705) binding the handshake MACs to this channel; empty for
  // plaintext.
  std::vector<std::byte> channel_binding();

  void close();
  bool is_closed() const { return closed_.load(); }
  // Adds this connection's TCP_INFO into *total (tcp_stats.hpp); false once closed. Thread-safe:
  // reads the descriptor fixed at construction, never the socket object.
  bool add_tcp_stats(TcpStats* total) const;
  // Caps what this connection sends at `bytes_per_s` (SO_MAX_PACING_RATE: the kernel's TCP paces
  // the connection itself, no qdisc needed). Call before the connection carries data.
  Status cap_send_rate(uint64_t bytes_per_s);
  // True when the last read_header failed because the peer closed the connection between frames
  // (an orderly end, as opposed to an error or a frame cut short).
  bool closed_between_frames() const { return closed_between_frames_; }

 private:
  Status io_status(const asio::error_code& ec, const char* what) const;

  Strand strand_;
  asio::ip::tcp::socket plain_;
  const int fd_;  // plain_'s descriptor, for add_tcp_stats from any thread
  std::shared_ptr<asio::ssl::context> tls_context_;
  bool is_server_;
  FrameLimits limits_;
  std::string remote_;
  EncodedHeader read_header_buf_{};
  EncodedHeader write_header_buf_{};
  std::vector<std::byte> skip_buf_;
  std::atomic<bool> closed_{false};
  bool closed_between_frames_ = false;
  // Non-null for TLS; refers to plain_, closed_ and remote_, so it is declared after them.
  std::unique_ptr<TlsStream> tls_;
};

}  // namespace longhaul::net
