#include "common/host_port.hpp"

#include <fmt/format.h>

#include <charconv>

namespace longhaul {

Status parse_host_port(std::string_view text, std::string* host, uint16_t* port) {
  std::string_view h, p;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return invalid_argument(fmt::format("'{}' is not [ipv6]:port", text));
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon)
      return invalid_argument(
          fmt::format("'{}' is not host:port (write IPv6 as [addr]:port)", text));
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (h.empty() || ec != std::errc() || end != p.data() + p.size() || value > 65535)
    return invalid_argument(fmt::format("'{}' is not host:port with a port in 0..65535", text));
  *host = std::string(h);
  *port = static_cast<uint16_t>(value);
  return Status::ok();
}

}  // namespace longhaul
