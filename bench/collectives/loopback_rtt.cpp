#include "loopback_rtt.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace {

bool exchange_byte(int fd, bool send_first) {
  char b = 'x';
  if (send_first && send(fd, &b, 1, 0) != 1) return false;
  if (recv(fd, &b, 1, MSG_WAITALL) != 1) return false;
  return send_first || send(fd, &b, 1, 0) == 1;
}

void no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

std::vector<double> loopback_round_trips(int count, int warmup) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return {};
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (client < 0 || connect(client, reinterpret_cast<sockaddr*>(&addr), len) != 0) return {};
  const int server = accept(listener, nullptr, nullptr);
  close(listener);
  if (server < 0) return {};
  no_delay(client);
  no_delay(server);
  std::thread echo([server, n = count + warmup] {
    for (int i = 0; i < n; ++i)
      if (!exchange_byte(server, false)) break;
  });
  std::vector<double> times;
  for (int i = 0; i < count + warmup; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!exchange_byte(client, true)) break;
    if (i >= warmup)
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  echo.join();
  close(client);
  close(server);
  if (static_cast<int>(times.size()) != count) times.clear();
  return times;
}
