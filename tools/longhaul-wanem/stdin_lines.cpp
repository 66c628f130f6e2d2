#include "stdin_lines.hpp"

#include <unistd.h>

#include <cerrno>
#include <thread>

#include <asio/post.hpp>

namespace longhaul::wanem {

void start_stdin_reader(asio::io_context& io, std::function<void(std::string)> on_line) {
  std::thread([&io, on_line = std::move(on_line)] {
    std::string pending;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        asio::post(io, [on_line, line = pending.substr(0, nl)] { on_line(line); });
        pending.erase(0, nl + 1);
      }
    }
    if (!pending.empty()) asio::post(io, [on_line, line = pending] { on_line(line); });
  }).detach();
}

}  // namespace longhaul::wanem
