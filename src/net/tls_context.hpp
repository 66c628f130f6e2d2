// TLS 1.3 contexts for listeners and connectors (OpenSSL; the handle is wrapped in an
// asio::ssl::context, and each connection runs its own TlsStream on it).
#pragma once

#include <memory>

#include <asio/ssl/context.hpp>

#include "common/status.hpp"
#include "net/options.hpp"

namespace longhaul::net {

// A server context: TLS 1.3 only, certificate chain and private key from PEM files.
Result<std::shared_ptr<asio::ssl::context>> make_server_tls_context(const TlsOptions& options);
// A client context: TLS 1.3 only; verifies the server against ca_file when given.
Result<std::shared_ptr<asio::ssl::context>> make_client_tls_context(const TlsOptions& options);

}  // namespace longhaul::net
