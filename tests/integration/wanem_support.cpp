#include "wanem_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <stdexcept>

namespace longhaul::testing {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

Wanem::Wanem(std::vector<std::string> args) {
  std::vector<std::string> argv = {LONGHAUL_WANEM_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  child_ = std::make_unique<Child>(argv, dir_.path() + "/wanem.log");
  auto ready = child_->wait_line([](const std::string& l) { return l == "READY"; },
                                 std::chrono::seconds(20));
  if (!ready) return;
  for (const std::string& line : child_->lines()) {
    ++answered_;
    std::istringstream in(line);
    std::string word, name;
    unsigned port = 0;
    if (in >> word >> name >> port && word == "ROUTE") ports_[name] = static_cast<uint16_t>(port);
    if (line == "READY") break;
  }
  ready_ = true;
}

uint16_t Wanem::port(const std::string& route) const {
  auto it = ports_.find(route);
  return it == ports_.end() ? 0 : it->second;
}

std::string Wanem::command(const std::string& line, std::chrono::milliseconds timeout) {
  child_->send(line);
  auto answer = child_->wait_line(
      [](const std::string& l) { return l.rfind("OK", 0) == 0 || l.rfind("ERR", 0) == 0; }, timeout,
      answered_);
  if (!answer) return "";
  // Answers come one per command, in order: the first unconsumed answer line is this one's.
  const auto lines = child_->lines();
  for (size_t i = answered_; i < lines.size(); ++i)
    if (lines[i].rfind("OK", 0) == 0 || lines[i].rfind("ERR", 0) == 0) {
      answered_ = i + 1;
      return lines[i];
    }
  return "";
}

TestServer::TestServer(Mode mode) : mode_(mode) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("test server: cannot listen");
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TestServer::~TestServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes the accept loop's poll
  acceptor_.join();
  {
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // wakes the connection threads
  }
  for (auto& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
  ::close(listen_fd_);
}

std::vector<ServerConnStats> TestServer::connections() const {
  std::lock_guard lock(mu_);
  return conns_;
}

void TestServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (stopping_) {
      ::close(fd);
      break;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard lock(mu_);
    const size_t index = conns_.size();
    conns_.emplace_back();
    fds_.push_back(fd);
    threads_.emplace_back([this, fd, index] { serve(fd, index); });
  }
}

void TestServer::serve(int fd, size_t index) {
  std::vector<char> buf(256 * 1024);
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) {
      std::lock_guard lock(mu_);
      conns_[index].error = n < 0 ? errno : 0;
      conns_[index].ended = true;
      return;
    }
    {
      std::lock_guard lock(mu_);
      auto& c = conns_[index];
      const auto now = Clock::now();
      if (c.bytes == 0) c.first_byte = now;
      c.last_byte = now;
      c.bytes += static_cast<uint64_t>(n);
    }
    if (mode_ == Mode::kEcho) {
      for (ssize_t sent = 0; sent < n;) {
        const ssize_t w =
            ::send(fd, buf.data() + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
        if (w <= 0) break;
        sent += w;
      }
    }
  }
}

Client::Client(uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
  const int one = 1;
  if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

Client::ReadResult Client::read_some(char* buf, size_t len, std::chrono::milliseconds timeout) {
  if (!wait_fd(fd_, POLLIN, Clock::now() + timeout)) return {Outcome::kTimeout};
  const ssize_t n = ::recv(fd_, buf, len, 0);
  if (n > 0) return {Outcome::kData, static_cast<size_t>(n)};
  if (n == 0) return {Outcome::kClosed};
  return {Outcome::kError, 0, errno};
}

bool Client::read_exact(char* buf, size_t len, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (size_t got = 0; got < len;) {
    if (!wait_fd(fd_, POLLIN, deadline)) return false;
    const ssize_t n = ::recv(fd_, buf + got, len - got, 0);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

bool Client::write_all(const char* buf, size_t len, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (size_t sent = 0; sent < len;) {
    if (!wait_fd(fd_, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd_, buf + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace longhaul::testing
