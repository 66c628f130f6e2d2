// Helpers for the longhaul-wanem tests: the emulator as a child process speaking its line
// protocol, small TCP servers (echo, sink) on ephemeral loopback ports, and socket I/O with
// timeouts, so a broken emulator fails a test instead of hanging it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "process.hpp"

namespace longhaul::testing {

// longhaul-wanem started with `args`; waits for READY and records the "ROUTE NAME PORT" lines.
class Wanem {
 public:
  explicit Wanem(std::vector<std::string> args);
  bool ready() const { return ready_; }
  uint16_t port(const std::string& route) const;
  // Sends one command line and returns its answer line ("OK ..." / "ERR ..."), or "" on timeout.
  std::string command(const std::string& line,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  Child& child() { return *child_; }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  std::unique_ptr<Child> child_;
  std::map<std::string, uint16_t> ports_;
  size_t answered_ = 0;  // stdout lines consumed so far
  bool ready_ = false;
};

// What a server saw on one accepted connection.
struct ServerConnStats {
  uint64_t bytes = 0;
  std::chrono::steady_clock::time_point first_byte{}, last_byte{};
  int error = 0;  // errno of the read that ended it (ECONNRESET after a reset); 0 on orderly EOF
  bool ended = false;
};

// A loopback TCP server on an ephemeral port, one thread per connection. kEcho sends back what
// it reads; kSink only counts.
class TestServer {
 public:
  enum class Mode { kEcho, kSink };
  explicit TestServer(Mode mode);
  ~TestServer();  // stops accepting, shuts every connection down, joins the threads
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Snapshot of the connections accepted so far, in accept order.
  std::vector<ServerConnStats> connections() const;

 private:
  void accept_loop();
  void serve(int fd, size_t index);

  Mode mode_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::vector<ServerConnStats> conns_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

// A connected, blocking client socket closed on destruction.
class Client {
 public:
  explicit Client(uint16_t port);  // connects to 127.0.0.1:port; fd() < 0 on failure
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  int fd() const { return fd_; }

  enum class Outcome { kData, kTimeout, kClosed, kError };
  struct ReadResult {
    Outcome outcome;
    size_t bytes = 0;
    int error = 0;  // errno for kError
  };
  // Waits up to `timeout` for some bytes, an orderly close or an error.
  ReadResult read_some(char* buf, size_t len, std::chrono::milliseconds timeout);
  // Reads exactly len bytes; false on timeout, close or error.
  bool read_exact(char* buf, size_t len, std::chrono::milliseconds timeout);
  // Writes all bytes; false on error or timeout.
  bool write_all(const char* buf, size_t len, std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
};

}  // namespace longhaul::testing
