#include "net/tls_context.hpp"

#include <openssl/ssl.h>

#include <fmt/format.h>

namespace longhaul::net {

static Result<std::shared_ptr<asio::ssl::context>> make_context(asio::ssl::context::method method) {
  auto ctx = std::make_shared<asio::ssl::context>(method);
  if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_3_VERSION) != 1)
    return Status(LH_ERR_UNSUPPORTED, "this OpenSSL cannot enforce TLS 1.3");
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_compression);
  // AES-128-GCM first: the cheapest AEAD on CPUs with AES-NI, and TLS throughput on a link is
  // bound by the cipher. AES-256-GCM and ChaCha20-Poly1305 stay allowed.
  if (SSL_CTX_set_ciphersuites(ctx->native_handle(),
                               "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                               "TLS_CHACHA20_POLY1305_SHA256") != 1)
    return Status(LH_ERR_UNSUPPORTED, "this OpenSSL lacks the TLS 1.3 AES-GCM ciphersuites");
  // No session tickets: links never resume sessions, and tickets would be post-handshake records
  // that SSL_read has to process (see tls_stream.hpp).
  SSL_CTX_set_num_tickets(ctx->native_handle(), 0);
  return ctx;
}

Result<std::shared_ptr<asio::ssl::context>> make_server_tls_context(const TlsOptions& o) {
  if (o.cert_file.empty() || o.key_file.empty())
    return invalid_argument("TLS listener needs a certificate file and a key file");
  auto ctx = make_context(asio::ssl::context::tls_server);
  if (!ctx) return ctx.status();
  // Our order wins over a client's (OpenSSL's clients list AES-256 first by default).
  SSL_CTX_set_options((*ctx)->native_handle(), SSL_OP_CIPHER_SERVER_PREFERENCE);
  asio::error_code ec;
  (*ctx)->use_certificate_chain_file(o.cert_file, ec);
  if (ec)
    return io_error(fmt::format("cannot load TLS certificate '{}': {}", o.cert_file, ec.message()));
  (*ctx)->use_private_key_file(o.key_file, asio::ssl::context::pem, ec);
  if (ec) return io_error(fmt::format("cannot load TLS key '{}': {}", o.key_file, ec.message()));
  return ctx;
}

Result<std::shared_ptr<asio::ssl::context>> make_client_tls_context(const TlsOptions& o) {
  auto ctx = make_context(asio::ssl::context::tls_client);
  if (!ctx) return ctx.status();
  if (!o.ca_file.empty()) {
    asio::error_code ec;
    (*ctx)->load_verify_file(o.ca_file, ec);
    if (ec)
      return io_error(fmt::format("cannot load TLS CA file '{}': {}", o.ca_file, ec.message()));
    (*ctx)->set_verify_mode(asio::ssl::verify_peer);
  } else {
    (*ctx)->set_verify_mode(asio::ssl::verify_none);
  }
  return ctx;
}

}  // namespace longhaul::net
