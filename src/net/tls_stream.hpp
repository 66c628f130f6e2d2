// TLS 1.3 over one TCP socket through OpenSSL memory BIOs, batching records.
//
// asio::ssl::stream pushes every TLS record (16 KiB) through a ~17 KiB BIO pair, so each record
// costs its own socket syscall and handler dispatch. This stream instead lets OpenSSL encrypt
// many records into a growing memory BIO and writes them with one syscall (hundreds of KiB at a
// time), and reads ciphertext in large chunks that OpenSSL then decrypts record by record
// straight into the caller's buffer.
//
// Concurrency. A TlsStream is used from one strand by at most one reader (read_exact) and one
// writer (write_all) at a time; the two are coroutines that interleave only at their co_await
// points. OpenSSL's SSL object is not thread-safe, but the strand guarantees no two SSL calls run
// at once. Interleaving SSL_read and SSL_write on one SSL is fine as long as neither suspends in
// the middle of an SSL call, and none does: every SSL_* / BIO_* call below runs to completion
// synchronously, and the only suspension points are socket operations on private buffers that no
// SSL call touches:
//   - the reader suspends in async_read_some into its own ciphertext buffer (rbuf_), which is
//     copied into the read BIO only after the read completes;
//   - the writer first moves the write BIO's bytes into its own buffer (wbuf_) and then suspends
//     in async_write on that buffer; the write BIO is free for further records meanwhile.
// OpenSSL's error queue is thread-local and a coroutine may resume on another thread, so every
// SSL call is preceded by ERR_clear_error() and its errors are collected before the next
// suspension.
//
// TLS 1.3 post-handshake messages: the contexts from tls_context.cpp issue no session tickets and
// longhaul never requests a KeyUpdate, so SSL_read never produces output in normal operation. If a
// peer does make SSL_read emit a record (a KeyUpdate reply), it waits in the write BIO and goes
// out ahead of the next write_all's data (records stay in order because the write BIO is a single
// FIFO that only the writer drains).
#pragma once

#include <openssl/ssl.h>

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
  Status encrypt(const std::byte* data, size_t n);
  // Writes everything in the write BIO to the socket.
  asio::awaitable<Status> flush();
  // Reads one chunk of ciphertext from the socket into the read BIO.
  asio::awaitable<Status> fill();
  Status tls_error(const char* what, int ssl_error) const;
  Status io_status(const asio::error_code& ec, const char* what) const;

  asio::ip::tcp::socket& socket_;
  bool clean_eof_ = false;
  bool eof_seen_ = false;
  const std::atomic<bool>& closed_;
  const std::string& remote_;
  SSL* ssl_ = nullptr;
  BIO* rbio_ = nullptr;           // network → OpenSSL (owned by ssl_)
  BIO* wbio_ = nullptr;           // OpenSSL → network (owned by ssl_)
  std::vector<std::byte> rbuf_;   // ciphertext from the socket
  std::vector<std::byte> wbuf_;   // ciphertext on its way to the socket
  std::vector<std::byte> stage_;  // coalesces small plaintext pieces into full records
};

}  // namespace longhaul::net
