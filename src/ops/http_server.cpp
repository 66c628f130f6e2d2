#include "ops/http_server.hpp"

#include <sys/socket.h>

#include <httplib.h>

#include <fmt/format.h>

namespace longhaul::ops {
namespace {

constexpr const char* kSecurityPolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

void add_common_headers(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Content-Security-Policy", kSecurityPolicy);
}

void configure(httplib::Server& server, const HttpOptions& options) {
  const auto ms = [](std::chrono::milliseconds d) {
    return std::pair<time_t, time_t>(d.count() / 1000, (d.count() % 1000) * 1000);
  };
  const auto [rs, rus] = ms(options.read_timeout);
  const auto [ws, wus] = ms(options.write_timeout);
  server.set_read_timeout(rs, rus);
  server.set_write_timeout(ws, wus);
  server.set_keep_alive_timeout(std::max<time_t>(1, rs));
  server.set_keep_alive_max_count(16);
  server.set_payload_max_length(HttpServer::kMaxBodyBytes);
  server.set_tcp_nodelay(true);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second process bind the
  // same port and take half the connections instead of failing.
  server.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const unsigned threads = options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  const auto refuse = [](const httplib::Request&, httplib::Response& res) {
    add_common_headers(res);
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("read-only: only GET and HEAD\n", "text/plain; charset=utf-8");
  };
  server.Post(".*", refuse);
  server.Put(".*", refuse);
  server.Patch(".*", refuse);
  server.Delete(".*", refuse);
  server.Options(".*", refuse);
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpOptions& options,
                                                      std::map<std::string, HttpHandler> routes) {
  if (options.threads == 0 || options.threads > 256)
    return invalid_argument("HTTP server threads must be 1..256");
  if (options.read_timeout.count() <= 0 || options.write_timeout.count() <= 0)
    return invalid_argument("HTTP timeouts must be positive");
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  configure(*s->server_, options);
  for (auto& [path, handler] : routes) {
    // Exact paths: httplib matches patterns as regular expressions, so escape the path.
    std::string pattern;
    for (char c : path) {
      if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) pattern += '\\';
      pattern += c;
    }
    // handler = handler: clang 14 cannot capture a structured binding by name.
    s->server_->Get(pattern, [handler = handler](const httplib::Request&, httplib::Response& res) {
      HttpResponse r = handler();
      add_common_headers(res);
      res.status = r.status;
      res.set_content(std::move(r.body), r.content_type.c_str());
    });
  }
  int port = options.port == 0
                 ? s->server_->bind_to_any_port(options.host)
                 : (s->server_->bind_to_port(options.host, options.port) ? options.port : -1);
  if (port <= 0)
    return io_error(fmt::format("cannot serve HTTP on {}:{}", options.host, options.port));
  s->host_ = options.host;
  s->port_ = static_cast<uint16_t>(port);
  s->thread_ = std::thread([server = s->server_.get()] { server->listen_after_bind(); });
  // httplib's stop() does nothing until the listening loop runs: wait for it, so that a server
  // destroyed right after start() does not leave that loop running (and the join waiting) forever.
  while (!s->server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

HttpServer::~HttpServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string HttpServer::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return fmt::format("http://{}{}{}:{}/", v6 ? "[" : "", host_, v6 ? "]" : "", port_);
}

}  // namespace longhaul::ops
