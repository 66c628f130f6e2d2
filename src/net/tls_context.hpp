// TLS 1.3 contexts for listeners and connectors (OpenSSL through asio::ssl).
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
