#include "net/tls_stream.hpp"

#include <openssl/err.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

namespace longhaul::net {
namespace {

constexpr auto kAwait = asio::use_awaitable;

// Largest TLS record payload; plaintext is handed to SSL_write in whole records where possible.
constexpr size_t kRecord = 16384;
// Plaintext handed to one SSL_write call (a multiple of kRecord).
constexpr size_t kEncryptChunk = 8 * kRecord;
// Ciphertext accumulated in the write BIO before it goes to the socket in one write.
constexpr size_t kWriteBatch = 512 << 10;
// Ciphertext asked of the socket per read.
constexpr size_t kReadChunk = 256 << 10;

// Drains OpenSSL's (thread-local) error queue into one line.
std::string drain_openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace

Status socket_status(const asio::error_code& ec, const char* what, const std::string& remote,
                     bool closed) {
  if (closed) return closed_error(fmt::format("connection to {} closed", remote));
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe || ec == asio::error::connection_aborted ||
      ec == asio::error::timed_out)
    return peer_lost(fmt::format("{} {}: {}", what, remote, ec.message()));
  return io_error(fmt::format("{} {}: {}", what, remote, ec.message()));
}

TlsStream::TlsStream(asio::ip::tcp::socket& socket, SSL_CTX* context,
                     const std::atomic<bool>& closed, const std::string& remote)
    : socket_(socket), closed_(closed), remote_(remote) {
  ERR_clear_error();
  ssl_ = SSL_new(context);
  if (!ssl_) return;
  rbio_ = BIO_new(BIO_s_mem());
  wbio_ = BIO_new(BIO_s_mem());
  if (!rbio_ || !wbio_) {
    BIO_free(rbio_);
    BIO_free(wbio_);
    rbio_ = wbio_ = nullptr;
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  // An empty memory BIO reports "retry" (its default EOF value of -1), which SSL_read turns into
  // SSL_ERROR_WANT_READ.
  SSL_set_bio(ssl_, rbio_, wbio_);  // ssl_ owns both now
  // Pull whole chunks of buffered ciphertext per BIO read instead of header, then body.
  SSL_set_read_ahead(ssl_, 1);
  ERR_clear_error();
}

TlsStream::~TlsStream() {
  if (ssl_) SSL_free(ssl_);
}

Status TlsStream::io_status(const asio::error_code& ec, const char* what) const {
  return socket_status(ec, what, remote_, closed_.load());
}

Status TlsStream::tls_error(const char* what, int ssl_error) const {
  std::string detail = drain_openssl_errors();
  if (closed_.load()) return closed_error(fmt::format("connection to {} closed", remote_));
  if (ssl_error == SSL_ERROR_ZERO_RETURN)
    return peer_lost(fmt::format("{} {}: peer closed the TLS session", what, remote_));
  if (detail.empty()) detail = fmt::format("TLS error {}", ssl_error);
  // A corrupt or forged record means the channel is gone, as any other broken connection.
  return peer_lost(fmt::format("{} {}: {}", what, remote_, detail));
}

asio::awaitable<Status> TlsStream::flush() {
  const size_t pending = BIO_ctrl_pending(wbio_);
  if (pending == 0) co_return Status::ok();
  if (wbuf_.size() < pending) wbuf_.resize(pending);
  // Move the ciphertext out of the BIO before suspending, so the BIO never changes under the
  // in-flight write.
  const int got = BIO_read(wbio_, wbuf_.data(), static_cast<int>(pending));
  if (got != static_cast<int>(pending))
    co_return io_error(fmt::format("writing to {}: TLS write buffer underflow", remote_));
  asio::error_code ec;
  const asio::const_buffer buf(wbuf_.data(), pending);
  co_await asio::async_write(socket_, buf, asio::redirect_error(kAwait, ec));
  if (ec) co_return io_status(ec, "writing to");
  co_return Status::ok();
}

asio::awaitable<Status> TlsStream::fill() {
  if (rbuf_.empty()) rbuf_.resize(kReadChunk);
  asio::error_code ec;
  const asio::mutable_buffer buf(rbuf_.data(), rbuf_.size());
  const size_t n = co_await socket_.async_read_some(buf, asio::redirect_error(kAwait, ec));
  eof_seen_ = ec == asio::error::eof;
  if (ec) co_return io_status(ec, "reading from");
  // A memory BIO grows as needed; data already in it is kept (it holds at most a partial record
  // here, since SSL_read asked for more).
  if (BIO_write(rbio_, rbuf_.data(), static_cast<int>(n)) != static_cast<int>(n))
    co_return io_error(fmt::format("reading from {}: TLS read buffer allocation failed", remote_));
  co_return Status::ok();
}

asio::awaitable<Status> TlsStream::handshake(bool server) {
  if (!ssl_) {
    const std::string detail = drain_openssl_errors();
    co_return auth_error(fmt::format(
        "TLS handshake with {} failed: cannot create a TLS session: {}", remote_, detail));
  }
  if (server)
    SSL_set_accept_state(ssl_);
  else
    SSL_set_connect_state(ssl_);
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) break;
    const int err = SSL_get_error(ssl_, r);
    if (err != SSL_ERROR_WANT_READ) {
      std::string detail = drain_openssl_errors();
      if (detail.empty()) detail = fmt::format("TLS error {}", err);
      const Status why =
          auth_error(fmt::format("TLS handshake with {} failed: {}", remote_, detail));
      // Best effort: send the alert OpenSSL queued, so the peer learns why.
      const Status ignored = co_await flush();
      (void)ignored;
      co_return why;
    }
    Status s = co_await flush();
    if (s) s = co_await fill();
    if (!s)
      co_return auth_error(fmt::format("TLS handshake with {} failed: {}", remote_, s.message()));
  }
  // The client's Finished (and anything else OpenSSL queued) must reach the peer now: the next
  // step of the longhaul handshake may be a read.
  Status s = co_await flush();
  if (!s)
    co_return auth_error(fmt::format("TLS handshake with {} failed: {}", remote_, s.message()));
  co_return Status::ok();
}

asio::awaitable<Status> TlsStream::read_exact(std::span<std::byte> dst) {
  if (!ssl_) co_return io_error(fmt::format("reading from {}: no TLS session", remote_));
  size_t got = 0;
  while (got < dst.size()) {
    ERR_clear_error();
    size_t n = 0;
    const size_t want = std::min<size_t>(dst.size() - got, INT_MAX);
    const int r = SSL_read_ex(ssl_, dst.data() + got, want, &n);
    if (r == 1) {
      got += n;
      continue;
    }
    const int err = SSL_get_error(ssl_, r);
    if (err != SSL_ERROR_WANT_READ) co_return tls_error("reading from", err);
    const bool nothing_buffered = got == 0 && BIO_ctrl_pending(rbio_) == 0;
    Status s = co_await fill();
    if (!s) {
      clean_eof_ = nothing_buffered && eof_seen_;
      co_return s;
    }
  }
  co_return Status::ok();
}

Status TlsStream::encrypt(const std::byte* data, size_t n) {
  ERR_clear_error();
  size_t written = 0;
  // A memory BIO accepts everything, so SSL_write_ex either writes all of it or fails.
  const int r = SSL_write_ex(ssl_, data, n, &written);
  if (r == 1 && written == n) return Status::ok();
  const int err = r == 1 ? SSL_ERROR_SSL : SSL_get_error(ssl_, r);
  return tls_error("writing to", err);
}

asio::awaitable<Status> TlsStream::write_all(std::span<const asio::const_buffer> buffers) {
  if (!ssl_) co_return io_error(fmt::format("writing to {}: no TLS session", remote_));
  if (stage_.size() < kRecord) stage_.resize(kRecord);
  size_t staged = 0;
  for (const asio::const_buffer& b : buffers) {
    const std::byte* p = static_cast<const std::byte*>(b.data());
    size_t n = b.size();
    while (n > 0) {
      Status s;
      if (staged > 0 || n < kRecord) {
        // Small pieces (a frame header, a payload's tail) are coalesced into full records rather
        // than each costing a record of its own.
        const size_t take = std::min(n, kRecord - staged);
        std::memcpy(stage_.data() + staged, p, take);
        staged += take;
        p += take;
        n -= take;
        if (staged == kRecord) {
          s = encrypt(stage_.data(), kRecord);
          staged = 0;
        }
      } else {
        const size_t take = std::min(n, kEncryptChunk) / kRecord * kRecord;
        s = encrypt(p, take);
        p += take;
        n -= take;
      }
      if (!s) co_return s;
      if (BIO_ctrl_pending(wbio_) >= kWriteBatch) {
        s = co_await flush();
        if (!s) co_return s;
      }
    }
  }
  if (staged > 0) {
    Status s = encrypt(stage_.data(), staged);
    if (!s) co_return s;
  }
  Status s = co_await flush();
  co_return s;
}

std::vector<std::byte> TlsStream::export_keying_material(const char* label, size_t label_len,
                                                         size_t bytes) {
  std::vector<std::byte> out(bytes);
  if (!ssl_ || SSL_export_keying_material(ssl_, reinterpret_cast<unsigned char*>(out.data()),
                                          out.size(), label, label_len, nullptr, 0, 0) != 1)
    out.clear();
  ERR_clear_error();
  return out;
}

}  // namespace longhaul::net
