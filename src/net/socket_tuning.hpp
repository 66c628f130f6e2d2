#pragma once

#include <asio/ip/tcp.hpp>

#include "common/status.hpp"
#include "net/options.hpp"

namespace longhaul::net {

// Applies TCP_NODELAY, buffer sizes, keepalive and TCP_USER_TIMEOUT to a connected socket.
Status tune_socket(asio::ip::tcp::socket& socket, const SocketOptions& options);

}  // namespace longhaul::net
