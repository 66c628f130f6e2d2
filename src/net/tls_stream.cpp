#include "net/tls_stream.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <sys/socket.h>

#include <cerrno>

#include <algorithm>
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

namespace longhaul::net {
namespace {

constexpr auto kAwait = asio::use_awaitable;

// Largest TLS record payload; small plaintext pieces are coalesced into records of this size.
constexpr size_t kRecord = 16384;
// Plaintext handed to one SSL_write call (whole records).
constexpr size_t kEncryptChunk = 16 * kRecord;
// Ciphertext accumulated before it goes to the socket in one send().
constexpr size_t kWriteBatch = 512 << 10;
// Ciphertext asked of the socket per recv() (many records at once).
constexpr size_t kReadChunk = 256 << 10;
// Read low-water marks (set_read_low_water): none below 32 KiB, at most 256 KiB; the largest
// TLS record on the wire (16 KiB of plaintext plus header, padding and tag).
constexpr size_t kMinLowWater = 32 << 10;
constexpr size_t kMaxLowWater = 256 << 10;
constexpr size_t kMaxRecordBytes = (16 << 10) + 256;
// A TLS record header: type, legacy version, 16-bit big-endian length.
constexpr size_t kRecordHeader = 5;
// Plaintext a reader decrypts before it lets the connection's thread go (see read_exact).
constexpr size_t kReadTurn = 256 << 10;

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

// The BIO OpenSSL reads and writes the socket through (see the header). Its data pointer is the
// TlsStream; it never blocks and never owns the socket.
struct SocketBio {
  static int read(BIO* bio, char* out, size_t len, size_t* got) {
    auto* self = static_cast<TlsStream*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    *got = 0;
    if (self->rpos_ == self->rend_) {
      const ssize_t n = ::recv(self->socket_.native_handle(), self->rbuf_.data(),
                               self->rbuf_.size(), MSG_DONTWAIT);
      if (n == 0) {
        self->eof_seen_ = true;
        return 0;
      }
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
          BIO_set_retry_read(bio);
        else
          self->io_errno_ = errno;
        return 0;
      }
      self->rpos_ = 0;
      self->rend_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(len, self->rend_ - self->rpos_);
    const std::byte* from = self->rbuf_.data() + self->rpos_;
    std::memcpy(out, from, n);
    self->track_records(from, n);
    self->rpos_ += n;
    *got = n;
    return 1;
  }

  static int write(BIO* bio, const char* data, size_t len, size_t* sent) {
    auto* self = static_cast<TlsStream*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    const auto* from = reinterpret_cast<const std::byte*>(data);
    self->wbuf_.insert(self->wbuf_.end(), from, from + len);
    *sent = len;
    return 1;
  }

  static long ctrl(BIO*, int cmd, long, void*) {
    // Nothing is buffered in the BIO, so a flush is done at once; nothing else is supported.
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
  }

  static int create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  // One method table for the process, made on first use and never freed.
  static const BIO_METHOD* method() {
    static BIO_METHOD* const m = [] {
      BIO_METHOD* meth =
          BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "longhaul socket");
      if (meth && (BIO_meth_set_read_ex(meth, &SocketBio::read) != 1 ||
                   BIO_meth_set_write_ex(meth, &SocketBio::write) != 1 ||
                   BIO_meth_set_ctrl(meth, &SocketBio::ctrl) != 1 ||
                   BIO_meth_set_create(meth, &SocketBio::create) != 1)) {
        BIO_meth_free(meth);
        meth = nullptr;
      }
      return meth;
    }();
    return m;
  }
};

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
  const BIO_METHOD* method = SocketBio::method();
  if (!method) return;
  ssl_ = SSL_new(context);
  if (!ssl_) return;
  BIO* bio = BIO_new(method);
  if (!bio) {
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // ssl_ owns the BIO now (one reference for both directions)
  rbuf_.resize(kReadChunk);
  wbuf_.reserve(kWriteBatch + kEncryptChunk + kEncryptChunk / 16 * 64);
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
  if (io_errno_ != 0)
    return io_status(asio::error_code(io_errno_, asio::error::get_system_category()), what);
  if (eof_seen_) return io_status(asio::error::eof, what);
  if (ssl_error == SSL_ERROR_ZERO_RETURN)
    return peer_lost(fmt::format("{} {}: peer closed the TLS session", what, remote_));
  if (detail.empty()) detail = fmt::format("TLS error {}", ssl_error);
  // A corrupt or forged record means the channel is gone, as any other broken connection.
  return peer_lost(fmt::format("{} {}: {}", what, remote_, detail));
}

void TlsStream::track_records(const std::byte* p, size_t n) {
  while (n > 0) {
    if (record_left_ > 0) {
      const size_t take = std::min(n, record_left_);
      record_left_ -= take;
      p += take;
      n -= take;
      continue;
    }
    const size_t take = std::min(n, kRecordHeader - header_have_);
    std::memcpy(header_.data() + header_have_, p, take);
    header_have_ += take;
    p += take;
    n -= take;
    if (header_have_ == kRecordHeader) {
      record_left_ =
          (std::to_integer<size_t>(header_[3]) << 8) | std::to_integer<size_t>(header_[4]);
      header_have_ = 0;
    }
  }
}

asio::awaitable<Status> TlsStream::wait_for(int ssl_want) {
  if (closed_.load()) co_return closed_error(fmt::format("connection to {} closed", remote_));
  const auto what = ssl_want == SSL_ERROR_WANT_WRITE ? asio::ip::tcp::socket::wait_write
                                                     : asio::ip::tcp::socket::wait_read;
  asio::error_code ec;
  co_await socket_.async_wait(what, asio::redirect_error(kAwait, ec));
  if (ec)
    co_return io_status(ec,
                        what == asio::ip::tcp::socket::wait_write ? "writing to" : "reading from");
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
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      std::string detail = drain_openssl_errors();
      if (eof_seen_)
        detail = "the peer closed the connection";
      else if (io_errno_ != 0)
        detail = std::strerror(io_errno_);
      else if (detail.empty())
        detail = fmt::format("TLS error {}", err);
      send_queued_now();  // best effort: the alert OpenSSL queued tells the peer why
      co_return auth_error(fmt::format("TLS handshake with {} failed: {}", remote_, detail));
    }
    Status s = co_await send_queued();
    if (s) s = co_await wait_for(SSL_ERROR_WANT_READ);
    if (!s)
      co_return auth_error(fmt::format("TLS handshake with {} failed: {}", remote_, s.message()));
  }
  // The client's Finished (and anything else OpenSSL queued) must reach the peer now: the next
  // step of the longhaul handshake may be a read.
  Status s = co_await send_queued();
  if (!s)
    co_return auth_error(fmt::format("TLS handshake with {} failed: {}", remote_, s.message()));
  co_return Status::ok();
}

asio::awaitable<Status> TlsStream::read_exact(std::span<std::byte> dst) {
  if (!ssl_) co_return io_error(fmt::format("reading from {}: no TLS session", remote_));
  clean_eof_ = false;
  size_t got = 0;
  while (got < dst.size()) {
    ERR_clear_error();
    size_t n = 0;
    const size_t want = std::min<size_t>(dst.size() - got, INT_MAX);
    const int r = SSL_read_ex(ssl_, dst.data() + got, want, &n);
    if (r == 1) {
      got += n;
      read_since_wait_ += n;
      if (read_since_wait_ >= kReadTurn) {
        // While ciphertext keeps coming this loop never waits on the socket, so without a turn
        // it would hold an I/O thread for as long as the sender keeps up. With K connections
        // and fewer threads, the readers of the busiest connections then starved the one that
        // carries the control messages: on loopback, K = 8, most of each 256 MiB op arrived
        // before the receive that its control message posts, and went through the unexpected-
        // data path (a fresh 1 MiB buffer per segment, its page faults and a second copy). A
        // plaintext read_some already goes back through the executor after every read.
        read_since_wait_ = 0;
        co_await asio::post(socket_.get_executor(), kAwait);
      }
      continue;
    }
    const int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ) {
      set_read_low_water(dst.size() - got);
      read_since_wait_ = 0;
      Status s = co_await wait_for(err);
      if (!s) co_return s;
      continue;
    }
    set_read_low_water(0);
    send_queued_now();  // best effort: an alert OpenSSL queued tells the peer why
    // A close between frames: nothing of this read arrived, not even part of a record.
    clean_eof_ = got == 0 && eof_seen_ && io_errno_ == 0 && rpos_ == rend_ && header_have_ == 0 &&
                 record_left_ == 0;
    co_return tls_error("reading from", err);
  }
  set_read_low_water(0);
  co_return Status::ok();
}

void TlsStream::set_read_low_water(size_t plaintext_left) {
  // Wake only once a good part of what is still to come is queued, as plaintext reads do
  // (connection.cpp). The wire must carry at least the plaintext still missing: every record is
  // larger than its plaintext, and what is already on this side (ciphertext in rbuf_, at most one
  // partial record inside OpenSSL, plaintext OpenSSL holds) can only make up for that much.
  const size_t here = (rend_ - rpos_) + kMaxRecordBytes + static_cast<size_t>(SSL_pending(ssl_));
  const size_t coming = plaintext_left > here ? plaintext_left - here : 0;
  const int want = coming >= kMinLowWater ? static_cast<int>(std::min(coming, kMaxLowWater)) : 1;
  if (want == low_water_) return;
  // A wake-up threshold, not part of what is read: if the kernel refuses it, reads stay correct.
  if (::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0)
    low_water_ = want;
}

Status TlsStream::encrypt(const std::byte* data, size_t n) {
  ERR_clear_error();
  size_t written = 0;
  // The BIO takes everything, so SSL_write_ex either encrypts all of it or fails.
  const int r = SSL_write_ex(ssl_, data, n, &written);
  if (r == 1 && written == n) return Status::ok();
  return tls_error("writing to", r == 1 ? SSL_ERROR_SSL : SSL_get_error(ssl_, r));
}

bool TlsStream::send_queued_now() {
  while (wpos_ < wbuf_.size()) {
    const ssize_t n = ::send(socket_.native_handle(), wbuf_.data() + wpos_, wbuf_.size() - wpos_,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      wpos_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) io_errno_ = errno;
    return false;
  }
  wbuf_.clear();
  wpos_ = 0;
  return true;
}

asio::awaitable<Status> TlsStream::send_queued() {
  // Nothing here holds a pointer into wbuf_ across the wait, so a record the reader queues
  // meanwhile (appending, perhaps reallocating) simply goes out after ours.
  while (!send_queued_now()) {
    if (io_errno_ != 0) co_return tls_error("writing to", SSL_ERROR_SYSCALL);
    Status s = co_await wait_for(SSL_ERROR_WANT_WRITE);
    if (!s) co_return s;
  }
  co_return Status::ok();
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
      if (wbuf_.size() - wpos_ >= kWriteBatch) {
        s = co_await send_queued();
        if (!s) co_return s;
      }
    }
  }
  if (staged > 0) {
    Status s = encrypt(stage_.data(), staged);
    if (!s) co_return s;
  }
  Status s = co_await send_queued();
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
