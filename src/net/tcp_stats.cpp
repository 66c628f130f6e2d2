#include "net/tcp_stats.hpp"

// linux/tcp.h, not netinet/tcp.h: glibc's struct tcp_info stops before the delivery rate.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace longhaul::net {

bool add_tcp_stats(int fd, TcpStats* total) {
  if (fd < 0) return false;
  tcp_info info{};
  socklen_t size = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return false;
  if (size < offsetof(tcp_info, tcpi_delivery_rate) + sizeof(info.tcpi_delivery_rate))
    return false;  // a kernel older than 4.9: no delivery rate
  const uint64_t rtt = info.tcpi_rtt;
  if (total->connections == 0 || rtt < total->rtt_us) {
    total->rtt_us = rtt;
    total->rtt_var_us = info.tcpi_rttvar;
  }
  total->connections += 1;
  total->delivery_rate += info.tcpi_delivery_rate;
  total->bytes_acked += info.tcpi_bytes_acked;
  total->bytes_received += info.tcpi_bytes_received;
  total->retransmits += info.tcpi_total_retrans;
  return true;
}

}  // namespace longhaul::net
