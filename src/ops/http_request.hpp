// The little of HTTP/1.x the read-only server needs (http_server.hpp): parsing a request head and
// writing a response. Strict on purpose: anything it does not expect is a 400, never a guess.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace longhaul::ops {

struct HttpRequestHead {
  std::string method;
  std::string path;  // the target without its query string
  size_t content_length = 0;
};

// Parses a request head (everything up to and including the blank line). nullopt: malformed.
std::optional<HttpRequestHead> parse_request_head(std::string_view head);

// A complete response: status line, the common headers (no-store, nosniff, the page's
// Content-Security-Policy, Connection: close), Content-Length, then `body` unless `head_only`.
std::string render_response(int status, std::string_view content_type, std::string_view body,
                            bool head_only, std::string_view extra_headers = {});

}  // namespace longhaul::ops
