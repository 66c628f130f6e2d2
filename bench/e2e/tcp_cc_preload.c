/* LD_PRELOAD shim for the WAN bench: every TCP socket a process opens uses the congestion control
 * named by LH_BENCH_TCP_CC (setsockopt TCP_CONGESTION, which root may do for any algorithm the
 * kernel has). Why: a network namespace other than the host's may only pick algorithms in the
 * host's tcp_allowed_congestion_control, and the bench must not change the host's settings.
 * Built by bench/e2e/wan into a temporary directory; used for iperf3, linkperf, the all-reduce
 * worker and gloo alike. A failure leaves the socket with the default and is reported by the
 * bench, which reads each connection's algorithm back (ss -ti). longhaul itself picks an algorithm
 * (SocketOptions::congestion_control, "auto": BBR): its setsockopt(TCP_CONGESTION) is given the
 * bench's algorithm instead, so the bench decides for every process alike. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol) {
  static int (*real_socket)(int, int, int);
  if (!real_socket) real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
  int fd = real_socket(domain, type, protocol);
  const char* cc = getenv("LH_BENCH_TCP_CC");
  if (fd >= 0 && cc && *cc && (domain == AF_INET || domain == AF_INET6) &&
      (type & 0xf) == SOCK_STREAM)
    (void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
  return fd;
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t size) {
  static int (*real_setsockopt)(int, int, int, const void*, socklen_t);
  if (!real_setsockopt)
    real_setsockopt = (int (*)(int, int, int, const void*, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
  const char* cc = getenv("LH_BENCH_TCP_CC");
  if (cc && *cc && level == IPPROTO_TCP && name == TCP_CONGESTION)
    return real_setsockopt(fd, level, name, cc, (socklen_t)strlen(cc));
  return real_setsockopt(fd, level, name, value, size);
}
