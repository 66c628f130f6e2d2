#include "ops/http_request.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

namespace longhaul::ops {
namespace {

constexpr std::string_view kSecurityPolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

std::string_view reason_of(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "METHOD SP target SP HTTP/1.x"; the target must be origin-form ("/...").
bool parse_request_line(std::string_view line, HttpRequestHead* out) {
  const size_t a = line.find(' ');
  const size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
  if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos) return false;
  const std::string_view method = line.substr(0, a);
  const std::string_view target = line.substr(a + 1, b - a - 1);
  const std::string_view version = line.substr(b + 1);
  if (method.empty() || target.empty() || target.front() != '/') return false;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
  if (!std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    return false;
  out->method = std::string(method);
  out->path = std::string(target.substr(0, target.find('?')));
  return true;
}

}  // namespace

std::optional<HttpRequestHead> parse_request_head(std::string_view head) {
  HttpRequestHead out;
  size_t end = head.find("\r\n");
  if (end == std::string_view::npos || !parse_request_line(head.substr(0, end), &out))
    return std::nullopt;
  for (size_t at = end + 2; at < head.size();) {
    end = head.find("\r\n", at);
    if (end == std::string_view::npos) return std::nullopt;
    const std::string_view line = head.substr(at, end - at);
    at = end + 2;
    if (line.empty()) break;  // the blank line ends the head
    const size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) return std::nullopt;
    const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), out.content_length);
      if (ec != std::errc() || p != value.data() + value.size()) return std::nullopt;
    } else if (iequals(name, "Transfer-Encoding")) {
      return std::nullopt;  // requests carry no body; a chunked one is not read, so refused
    }
  }
  return out;
}

std::string render_response(int status, std::string_view content_type, std::string_view body,
                            bool head_only, std::string_view extra_headers) {
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\nContent-Security-Policy: {}\r\nConnection: close\r\n"
      "{}\r\n",
      status, reason_of(status), content_type, body.size(), kSecurityPolicy, extra_headers);
  if (!head_only) out.append(body);
  return out;
}

}  // namespace longhaul::ops
