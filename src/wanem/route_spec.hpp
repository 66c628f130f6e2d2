// The text forms of a route: `NAME=LISTEN>TARGET[,key=value...]` on the command line, and the
// addresses inside it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.hpp"
#include "wanem/link_shape.hpp"

namespace longhaul::wanem {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const;  // "host:port", IPv6 hosts in brackets
};

struct RouteSpec {
  std::string name;
  HostPort listen;                 // port 0: ephemeral
  std::optional<HostPort> target;  // nullopt: "-", set later with the `target` command
  LinkShape shape;
};

// Route names are 1..64 characters of [A-Za-z0-9_.-] so they survive the line protocol intact.
Status check_route_name(std::string_view name);
// "host:port" or "[v6]:port"; allow_zero_port for listen addresses.
Status parse_address(std::string_view text, bool allow_zero_port, HostPort* out);
// "host:port" or "-" (target not known yet).
Status parse_target(std::string_view text, std::optional<HostPort>* out);
// `NAME=LISTEN>TARGET[,key=value...]`; `defaults` supplies the shape fields not given.
Status parse_route_spec(std::string_view text, const LinkShape& defaults, RouteSpec* out);

}  // namespace longhaul::wanem
