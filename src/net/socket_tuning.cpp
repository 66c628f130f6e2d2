#include "net/socket_tuning.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/log.hpp"

namespace longhaul::net {

static Status set_int(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof(value)) != 0)
    return io_error(fmt::format("setsockopt({}={}) failed: {}", what, value, std::strerror(errno)));
  return Status::ok();
}

// The kernel's TCP_CA_NAME_MAX (include/net/tcp.h; not exported to user space).
constexpr size_t kCongestionNameMax = 16;

std::string congestion_control_of(int fd) {
  char name[kCongestionNameMax] = {};
  socklen_t size = sizeof(name);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &size) != 0) return {};
  return std::string(name, ::strnlen(name, size));
}

// "auto" falls back to the system's algorithm where BBR is missing or not allowed to this process
// (tcp_allowed_congestion_control); that is a property of the host, not a fault, so it is said
// once per process, with what the connections use instead.
static void note_auto_fallback(int fd, int error) {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  log::info("net",
            "congestion_control=auto: BBR is not available to this process ({}); connections use "
            "the system's {} (a sync after idle may restart from slow start)",
            std::strerror(error), congestion_control_of(fd));
}

static Status set_congestion_control(int fd, const std::string& wanted) {
  if (wanted == "system") return Status::ok();
  const std::string name = wanted == "auto" ? "bbr" : wanted;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                   static_cast<socklen_t>(name.size())) == 0)
    return Status::ok();
  const int error = errno;
  if (wanted == "auto" && (error == EPERM || error == ENOENT)) {
    note_auto_fallback(fd, error);
    return Status::ok();
  }
  return io_error(
      fmt::format("setsockopt(TCP_CONGESTION={}) failed: {}", name, std::strerror(error)));
}

Status tune_socket(asio::ip::tcp::socket& socket, const SocketOptions& o) {
  const int fd = socket.native_handle();
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  if (o.send_buffer_bytes > 0)
    LH_RETURN_IF_ERROR(set_int(fd, SOL_SOCKET, SO_SNDBUF, o.send_buffer_bytes, "SO_SNDBUF"));
  if (o.receive_buffer_bytes > 0)
    LH_RETURN_IF_ERROR(set_int(fd, SOL_SOCKET, SO_RCVBUF, o.receive_buffer_bytes, "SO_RCVBUF"));
  LH_RETURN_IF_ERROR(set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE,
                             static_cast<int>(o.keepalive_idle.count()), "TCP_KEEPIDLE"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL,
                             static_cast<int>(o.keepalive_interval.count()), "TCP_KEEPINTVL"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, o.keepalive_count, "TCP_KEEPCNT"));
  LH_RETURN_IF_ERROR(set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
                             static_cast<int>(o.user_timeout.count()), "TCP_USER_TIMEOUT"));
  LH_RETURN_IF_ERROR(set_congestion_control(fd, o.congestion_control));
  return Status::ok();
}

}  // namespace longhaul::net
