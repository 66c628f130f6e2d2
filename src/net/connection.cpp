#include "net/connection.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <asio/buffer.hpp>
#include <asio/dispatch.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

namespace longhaul::net {
namespace {

constexpr auto kAwait = asio::use_awaitable;

std::string describe(const asio::ip::tcp::socket& s) {
  asio::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "unknown";
  return ep.address().is_v6() ? fmt::format("[{}]:{}", ep.address().to_string(), ep.port())
                              : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

// Payload read low-water marks: up to 256 KiB, none when less than 32 KiB is still to come (a
// small payload is read as it lands, without the two extra system calls).
constexpr size_t kPayloadLowWater = 256 << 10;
constexpr size_t kMinPayloadLowWater = 32 << 10;
constexpr size_t kPushedTail = 64 << 10;

// A frame as one gathered write: its header and its payload.
using FrameBuffers = std::array<asio::const_buffer, 2>;

FrameBuffers skip_bytes(FrameBuffers b, size_t n) {
  for (auto& piece : b) {
    const size_t cut = std::min(n, piece.size());
    piece += cut;
    n -= cut;
  }
  return b;
}

FrameBuffers first_bytes(FrameBuffers b, size_t n) {
  for (auto& piece : b) {
    piece = asio::const_buffer(piece.data(), std::min(n, piece.size()));
    n -= piece.size();
  }
  return b;
}

// SO_RCVLOWAT is a wake-up threshold, not part of what is read: if the kernel refuses it the
// reads are merely smaller, so the caller keeps going with the old value.
bool set_receive_low_water(int fd, int bytes) {
  return ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) == 0;
}

}  // namespace

Connection::Connection(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls,
                       bool is_server, FrameLimits limits)
    : strand_(socket.get_executor()),
      plain_(std::move(socket)),
      fd_(plain_.is_open() ? static_cast<int>(plain_.native_handle()) : -1),
      tls_context_(std::move(tls)),
      is_server_(is_server),
      limits_(limits),
      remote_(describe(plain_)) {
  if (tls_context_)
    tls_ = std::make_unique<TlsStream>(plain_, tls_context_->native_handle(), closed_, remote_);
}

Connection::~Connection() {
  asio::error_code ec;
  plain_.close(ec);
}

Status Connection::io_status(const asio::error_code& ec, const char* what) const {
  return socket_status(ec, what, remote_, closed_.load());
}

// GCC 12 can destroy temporaries inside a co_await operand twice, so every awaited call below
// takes named locals (or trivially destructible values) only.

asio::awaitable<Status> Connection::tls_handshake() {
  if (!tls_) co_return Status::ok();
  const bool server = is_server_;
  Status s = co_await tls_->handshake(server);
  co_return s;
}

asio::awaitable<Result<FrameHeader>> Connection::read_header() {
  if (tls_) {
    const std::span<std::byte> dst(read_header_buf_.data(), read_header_buf_.size());
    Status s = co_await tls_->read_exact(dst);
    if (!s) {
      closed_between_frames_ = tls_->clean_eof();
      co_return s;
    }
  } else {
    asio::error_code ec;
    const asio::mutable_buffer buf(read_header_buf_.data(), read_header_buf_.size());
    const size_t n = co_await asio::async_read(plain_, buf, asio::redirect_error(kAwait, ec));
    if (ec) {
      closed_between_frames_ = ec == asio::error::eof && n == 0;
      co_return io_status(ec, "reading from");
    }
  }
  FrameHeader h;
  Status s = decode_header(read_header_buf_, limits_, &h);
  if (!s) co_return s.with_context(fmt::format("from {}", remote_));
  co_return h;
}

asio::awaitable<Status> Connection::read_payload(std::span<std::byte> dst) {
  if (dst.empty()) co_return Status::ok();
  if (tls_) {
    Status s = co_await tls_->read_exact(dst);
    co_return s;
  }
  // Sleep until a good part of the payload is queued (SO_RCVLOWAT, never above what is still to
  // come, so the last bytes always wake us). A reader woken for every few segments that land
  // takes a socket-buffer's worth per system call, and every such read costs an epoll round and a
  // hand-off between threads: on loopback that made the kernel's share of an all-reduce ~15%
  // larger (docs/allreduce_bench.md).
  const int fd = plain_.native_handle();
  int low_water = 1;
  size_t got = 0;
  Status status;
  while (got < dst.size()) {
    const size_t remaining = dst.size() - got;
    const int want = remaining >= kMinPayloadLowWater
                         ? static_cast<int>(std::min(remaining, kPayloadLowWater))
                         : 1;
    if (want != low_water && set_receive_low_water(fd, want)) low_water = want;
    asio::error_code ec;
    const asio::mutable_buffer buf(dst.data() + got, remaining);
    got += co_await plain_.async_read_some(buf, asio::redirect_error(kAwait, ec));
    if (ec) {
      status = io_status(ec, "reading from");
      break;
    }
  }
  if (low_water != 1) set_receive_low_water(fd, 1);  // frame headers: wake for any byte
  co_return status;
}

asio::awaitable<Status> Connection::skip_payload(uint64_t n) {
  if (skip_buf_.empty()) skip_buf_.resize(64 << 10);
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, skip_buf_.size()));
    const std::span<std::byte> dst(skip_buf_.data(), chunk);
    Status s = co_await read_payload(dst);
    if (!s) co_return s;
    n -= chunk;
  }
  co_return Status::ok();
}

asio::awaitable<Status> Connection::write_frame(const FrameHeader& header,
                                                std::span<const std::byte> payload) {
  write_header_buf_ = encode_header(header);
  const FrameBuffers bufs = {asio::const_buffer(write_header_buf_.data(), write_header_buf_.size()),
                             asio::const_buffer(payload.data(), payload.size())};
  if (tls_) {
    const std::span<const asio::const_buffer> pieces(bufs);
    Status s = co_await tls_->write_all(pieces);
    co_return s;
  }
  // All but the frame's last kPushedTail bytes go out with MSG_MORE: a write that ends part-way
  // into a TCP segment leaves it for the next write to fill instead of sending it short, so a
  // frame crosses loopback in full 64 KiB segments rather than ~36 KB ones (and the receiver's
  // stack handles ~40% fewer). Only the tail, written without the flag, is pushed at once; the
  // kernel also pushes whenever the socket buffer is full, so nothing waits on the flag.
  const size_t total = write_header_buf_.size() + payload.size();
  const size_t corked = total > kPushedTail ? total - kPushedTail : 0;
  size_t sent = 0;
  asio::error_code ec;
  while (sent < corked) {
    const FrameBuffers part = first_bytes(skip_bytes(bufs, sent), corked - sent);
    sent += co_await plain_.async_send(part, MSG_MORE, asio::redirect_error(kAwait, ec));
    if (ec) co_return io_status(ec, "writing to");
  }
  const FrameBuffers tail = skip_bytes(bufs, sent);
  co_await asio::async_write(plain_, tail, asio::redirect_error(kAwait, ec));
  if (ec) co_return io_status(ec, "writing to");
  co_return Status::ok();
}

std::vector<std::byte> Connection::channel_binding() {
  if (!tls_) return {};
  static constexpr char kLabel[] = "EXPORTER-longhaul-handshake";
  return tls_->export_keying_material(kLabel, sizeof(kLabel) - 1, 32);
}

bool Connection::add_tcp_stats(TcpStats* total) const {
  // A closed descriptor may be reused by another socket: ask only while this one is open.
  return !closed_.load() && net::add_tcp_stats(fd_, total);
}

Status Connection::cap_send_rate(uint64_t bytes_per_s) {
  if (::setsockopt(fd_, SOL_SOCKET, SO_MAX_PACING_RATE, &bytes_per_s, sizeof bytes_per_s) != 0)
    return io_error(fmt::format("setsockopt(SO_MAX_PACING_RATE={}) failed: {}", bytes_per_s,
                                std::strerror(errno)));
  return Status::ok();
}

void Connection::close() {
  if (closed_.exchange(true)) return;
  // Closing on the strand keeps the socket single-threaded; the shared_ptr keeps it alive.
  asio::dispatch(strand_, [self = shared_from_this()] {
    asio::error_code ec;
    self->plain_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    self->plain_.close(ec);
  });
}

}  // namespace longhaul::net
