#include "net/socket_tuning.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace longhaul::net {

static Status set_int(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof(value)) != 0)
    return io_error(fmt::format("setsockopt({}={}) failed: {}", what, value, std::strerror(errno)));
  return Status::ok();
}

Status tune_socket(asio::ip::tcp::socket& socket, const SocketOptions& o) {
  const int fd = socket.native_handle();
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  if (o.send_buffer_bytes > 0)
    LH_RETURN_IF_ERROR(set_int(fd, SOL_SOCKET, SO_SNDBUF, o.send_buffer_bytes, "SO_SNDBUF"));
  if (o.receive_buffer_bytes > 0)
    LH_RETURN_IF_ERROR(set_int(fd, SOL_SOCKET, SO_RCVBUF, o.receive_buffer_bytes, "SO_RCVBUF"));
  LH_RETURN_IF_ERROR(set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, static_cast<int>(o.keepalive_idle.count()), "TCP_KEEPIDLE"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, static_cast<int>(o.keepalive_interval.count()), "TCP_KEEPINTVL"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, o.keepalive_count, "TCP_KEEPCNT"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, static_cast<int>(o.user_timeout.count()), "TCP_USER_TIMEOUT"));
  return Status::ok();
}

}  // namespace longhaul::net
