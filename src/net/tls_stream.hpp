// TLS 1.3 over one TCP socket, OpenSSL reading and writing the socket itself.
//
// asio::ssl::stream pushes every TLS record (16 KiB) through a ~17 KiB memory BIO pair, one
// socket operation and handler dispatch per record, and a memory-BIO stream still copies every
// byte into and out of its BIOs. This stream gives OpenSSL a BIO of its own instead:
//   - sending, OpenSSL encrypts records and the BIO appends them to the stream's send buffer,
//     which goes to the socket with one non-blocking send() per ~512 KiB;
//   - receiving, the BIO recv()s ciphertext in large chunks (many records) into the stream's
//     receive buffer and hands OpenSSL each record from there; OpenSSL decrypts it and copies
//     the plaintext into the caller's buffer. (OpenSSL's own read-ahead is off on purpose: with a
//     large read buffer it memmoves all unread ciphertext to the buffer's front before every
//     record, which costs more than the one copy out of our buffer.)
// So each byte is copied once between the socket buffers and OpenSSL's record buffers, in each
// direction, besides OpenSSL's own plaintext copies. When the socket would block, the coroutine
// suspends in socket.async_wait until it is ready, then carries on.
//
// Concurrency. A TlsStream is used from one strand by at most one reader (read_exact) and one
// writer (write_all) at a time; the two are coroutines that interleave only at their co_await
// points. OpenSSL's SSL object is not thread-safe, but the strand guarantees no two SSL calls run
// at once, and OpenSSL supports a non-blocking SSL_read pending (WANT_READ) while SSL_write is
// called: that is ordinary full-duplex non-blocking use. Every SSL_* call runs to completion
// synchronously; the only suspension points are async_wait on the socket, and no pointer into
// the stream's buffers is held across one (send() and recv() are synchronous and non-blocking).
// OpenSSL's error queue is thread-local and a coroutine may resume on another thread, so every
// SSL call is preceded by ERR_clear_error() and its errors are collected before the next
// suspension.
//
// TLS 1.3 post-handshake messages: the contexts from tls_context.cpp issue no session tickets and
// longhaul never requests a KeyUpdate, so SSL_read never writes in normal operation. Whatever it
// does queue (an alert before failing, a KeyUpdate reply) lands in the same send buffer, behind
// the writer's records, and goes out with the next write_all (an alert: at once, best effort).
#pragma once

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>
#include <asio/buffer.hpp>
#include <asio/ip/tcp.hpp>

#include "common/status.hpp"

namespace longhaul::net {

// Maps a socket error to a Status: LH_ERR_CLOSED once the connection was closed locally,
// LH_ERR_PEER_LOST for the ways a peer disappears, LH_ERR_IO otherwise.
Status socket_status(const asio::error_code& ec, const char* what, const std::string& remote,
                     bool closed);

class TlsStream {
 public:
  // `socket`, `closed` and `remote` belong to the owning Connection and outlive the stream.
  TlsStream(asio::ip::tcp::socket& socket, SSL_CTX* context, const std::atomic<bool>& closed,
            const std::string& remote);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Runs the TLS handshake; any failure is LH_ERR_AUTH.
  asio::awaitable<Status> handshake(bool server);
  // Reads exactly dst.size() plaintext bytes into dst.
  asio::awaitable<Status> read_exact(std::span<std::byte> dst);
  // True when the last read_exact failed because the peer closed the connection before sending
  // any byte of it (a close between frames, not in the middle of one).
  bool clean_eof() const { return clean_eof_; }
  // Writes every byte of `buffers`; completes once the kernel has all the ciphertext.
  asio::awaitable<Status> write_all(std::span<const asio::const_buffer> buffers);
  // RFC 5705 exported keying material for `label` (empty on failure).
  std::vector<std::byte> export_keying_material(const char* label, size_t label_len, size_t bytes);

 private:
  friend struct SocketBio;  // the BIO callbacks below reach recv/send state

  // Suspends until the socket is readable (WANT_READ) or writable (WANT_WRITE).
  asio::awaitable<Status> wait_for(int ssl_want);
  // SO_RCVLOWAT for the rest of a read of `plaintext_left` bytes (0: none, wake for any byte).
  void set_read_low_water(size_t plaintext_left);
  // Encrypts [data, data + n) into the send buffer.
  Status encrypt(const std::byte* data, size_t n);
  // Sends the send buffer, waiting for the socket as needed.
  asio::awaitable<Status> send_queued();
  // Sends what the socket takes now; true once the send buffer is empty. Sets io_errno_ on error.
  bool send_queued_now();
  // A failed SSL call as a Status: the socket's own error when the BIO saw one.
  Status tls_error(const char* what, int ssl_error) const;
  // Follows the record framing of ciphertext handed to OpenSSL, so a close can be told to fall
  // between records or inside one.
  void track_records(const std::byte* p, size_t n);
  Status io_status(const asio::error_code& ec, const char* what) const;

  asio::ip::tcp::socket& socket_;
  bool clean_eof_ = false;
  const std::atomic<bool>& closed_;
  const std::string& remote_;
  SSL* ssl_ = nullptr;
  // The peer closed its sending side (recv returned 0); the last recv/send errno (0: none).
  bool eof_seen_ = false;
  int io_errno_ = 0;
  std::vector<std::byte> wbuf_;  // ciphertext queued for the socket, [wpos_, end) not yet sent
  size_t wpos_ = 0;
  std::vector<std::byte> rbuf_;  // ciphertext received, [rpos_, rend_) not yet given to OpenSSL
  size_t rpos_ = 0;
  size_t rend_ = 0;
  std::array<std::byte, 5> header_{};  // a record header handed to OpenSSL in pieces
  size_t header_have_ = 0;
  size_t record_left_ = 0;        // body bytes of the current record not yet handed to OpenSSL
  std::vector<std::byte> stage_;  // coalesces small plaintext pieces into full records
  int low_water_ = 1;             // the socket's SO_RCVLOWAT as last set
  size_t read_since_wait_ = 0;    // plaintext read since the reader last gave up its thread
};

}  // namespace longhaul::net
