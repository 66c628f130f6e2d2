#pragma once

#include <string>

#include <asio/ip/tcp.hpp>

#include "common/status.hpp"
#include "net/options.hpp"

namespace longhaul::net {

// Applies TCP_NODELAY, buffer sizes, keepalive, TCP_USER_TIMEOUT and the congestion control
// (options.hpp: "auto", "system" or a name) to a connected socket. An error names the option the
// kernel refused; "auto" never fails for want of BBR.
Status tune_socket(asio::ip::tcp::socket& socket, const SocketOptions& options);

// The congestion control the socket `fd` uses (TCP_CONGESTION); empty when the kernel answers
// nothing (not a TCP socket).
std::string congestion_control_of(int fd);

}  // namespace longhaul::net
