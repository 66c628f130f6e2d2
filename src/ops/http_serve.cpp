// One connection of the read-only HTTP server (http_server.hpp): read the request head under its
// deadlines, answer, close.
#include <array>
#include <string_view>

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "ops/http_request.hpp"
#include "ops/http_server_impl.hpp"

namespace longhaul::ops {
namespace {

constexpr std::chrono::milliseconds kLinger{500};

// Arms the connection's deadline: when it fires, the socket closes and its pending read or write
// ends with an error.
void arm(HttpConnection& conn, std::chrono::steady_clock::time_point at) {
  conn.deadline.expires_at(at);
  conn.deadline.async_wait([&conn](asio::error_code ec) {
    if (ec) return;
    asio::error_code ignored;
    conn.socket.close(ignored);
  });
}

}  // namespace

asio::awaitable<void> HttpServer::Impl::serve(std::shared_ptr<HttpConnection> conn) {
  const auto accepted = std::chrono::steady_clock::now();
  arm(*conn, accepted + options.idle_timeout);
  std::string head;
  std::array<char, 2048> buf;
  size_t end = std::string::npos;
  while (end == std::string::npos && head.size() <= kMaxHeadBytes) {
    asio::error_code ec;
    const size_t n = co_await conn->socket.async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    if (head.empty()) arm(*conn, accepted + options.read_timeout);  // the first byte came
    head.append(buf.data(), n);
    end = head.find("\r\n\r\n");
  }
  if (end != std::string::npos) {
    conn->answering = true;
    head.resize(end + 4);
    bool head_only = false;
    const HttpResponse r = answer(head, &head_only);
    const std::string extra = r.status == 405 ? "Allow: GET, HEAD\r\n" : "";
    const std::string bytes = render_response(r.status, r.content_type, r.body, head_only, extra);
    arm(*conn, std::chrono::steady_clock::now() + options.write_timeout);
    asio::error_code ec;
    co_await asio::async_write(conn->socket, asio::buffer(bytes),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) conn->socket.shutdown(asio::socket_base::shutdown_send, ec);
    // A lingering close: unread request bytes (a refused body) at close() would reset the
    // connection and could destroy the answer before the client read it; wait briefly for its end.
    if (!ec) arm(*conn, std::chrono::steady_clock::now() + kLinger);
    while (!ec)
      (void)co_await conn->socket.async_read_some(asio::buffer(buf),
                                                  asio::redirect_error(asio::use_awaitable, ec));
  } else if (head.size() > kMaxHeadBytes) {
    const std::string too_long =
        render_response(400, "text/plain; charset=utf-8", "request head too long\n", false);
    asio::error_code ec;
    co_await asio::async_write(conn->socket, asio::buffer(too_long),
                               asio::redirect_error(asio::use_awaitable, ec));
  }
  conn->deadline.cancel();
  asio::error_code ignored;
  conn->socket.close(ignored);
  release(conn);
}

HttpResponse HttpServer::Impl::answer(const std::string& head, bool* head_only) const {
  const auto request = parse_request_head(head);
  if (!request) return {400, "text/plain; charset=utf-8", "malformed request\n"};
  if (request->content_length > kMaxBodyBytes)
    return {413, "text/plain; charset=utf-8", "requests carry no body\n"};
  if (request->method != "GET" && request->method != "HEAD")
    return {405, "text/plain; charset=utf-8", "read-only: only GET and HEAD\n"};
  *head_only = request->method == "HEAD";
  auto route = routes.find(request->path);
  if (route == routes.end()) return {404, "text/plain; charset=utf-8", "not found\n"};
  return route->second();
}

}  // namespace longhaul::ops
