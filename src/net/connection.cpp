#include "net/connection.hpp"

#include <openssl/ssl.h>

#include <array>

#include <asio/buffer.hpp>
#include <asio/dispatch.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <fmt/format.h>

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

}  // namespace

Connection::Connection(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls,
                       bool is_server, FrameLimits limits)
    : strand_(socket.get_executor()),
      plain_(std::move(socket)),
      tls_context_(std::move(tls)),
      is_server_(is_server),
      limits_(limits),
      remote_(describe(plain_)) {
  if (tls_context_) tls_stream_.emplace(plain_, *tls_context_);
}

Connection::~Connection() {
  asio::error_code ec;
  plain_.close(ec);
}

Status Connection::io_status(const asio::error_code& ec, const char* what) const {
  if (closed_.load()) return closed_error(fmt::format("connection to {} closed", remote_));
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe || ec == asio::error::connection_aborted ||
      ec == asio::error::timed_out || ec.category() == asio::error::get_ssl_category())
    return peer_lost(fmt::format("{} {}: {}", what, remote_, ec.message()));
  return io_error(fmt::format("{} {}: {}", what, remote_, ec.message()));
}

asio::awaitable<Status> Connection::tls_handshake() {
  if (!tls_stream_) co_return Status::ok();
  asio::error_code ec;
  co_await tls_stream_->async_handshake(is_server_ ? asio::ssl::stream_base::server : asio::ssl::stream_base::client,
                                        asio::redirect_error(kAwait, ec));
  if (ec) co_return auth_error(fmt::format("TLS handshake with {} failed: {}", remote_, ec.message()));
  co_return Status::ok();
}

asio::awaitable<Result<FrameHeader>> Connection::read_header() {
  asio::error_code ec;
  auto buf = asio::buffer(read_header_buf_);
  if (tls_stream_) co_await asio::async_read(*tls_stream_, buf, asio::redirect_error(kAwait, ec));
  else co_await asio::async_read(plain_, buf, asio::redirect_error(kAwait, ec));
  if (ec) co_return io_status(ec, "reading from");
  FrameHeader h;
  Status s = decode_header(read_header_buf_, limits_, &h);
  if (!s) co_return s.with_context(fmt::format("from {}", remote_));
  co_return h;
}

asio::awaitable<Status> Connection::read_payload(std::span<std::byte> dst) {
  if (dst.empty()) co_return Status::ok();
  asio::error_code ec;
  auto buf = asio::buffer(dst.data(), dst.size());
  if (tls_stream_) co_await asio::async_read(*tls_stream_, buf, asio::redirect_error(kAwait, ec));
  else co_await asio::async_read(plain_, buf, asio::redirect_error(kAwait, ec));
  if (ec) co_return io_status(ec, "reading from");
  co_return Status::ok();
}

asio::awaitable<Status> Connection::skip_payload(uint64_t n) {
  if (skip_buf_.empty()) skip_buf_.resize(64 << 10);
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, skip_buf_.size()));
    Status s = co_await read_payload(std::span(skip_buf_.data(), chunk));
    if (!s) co_return s;
    n -= chunk;
  }
  co_return Status::ok();
}

asio::awaitable<Status> Connection::write_frame(const FrameHeader& header,
                                               std::span<const std::byte> payload) {
  write_header_buf_ = encode_header(header);
  std::array<asio::const_buffer, 2> bufs = {asio::buffer(write_header_buf_),
                                            asio::buffer(payload.data(), payload.size())};
  asio::error_code ec;
  if (tls_stream_) co_await asio::async_write(*tls_stream_, bufs, asio::redirect_error(kAwait, ec));
  else co_await asio::async_write(plain_, bufs, asio::redirect_error(kAwait, ec));
  if (ec) co_return io_status(ec, "writing to");
  co_return Status::ok();
}

std::vector<std::byte> Connection::channel_binding() {
  if (!tls_stream_) return {};
  static constexpr char kLabel[] = "EXPORTER-longhaul-handshake";
  std::vector<std::byte> out(32);
  if (SSL_export_keying_material(tls_stream_->native_handle(), reinterpret_cast<unsigned char*>(out.data()),
                                 out.size(), kLabel, sizeof(kLabel) - 1, nullptr, 0, 0) != 1)
    out.clear();
  return out;
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
