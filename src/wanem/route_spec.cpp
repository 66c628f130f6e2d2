#include "wanem/route_spec.hpp"

#include "common/host_port.hpp"

#include <charconv>

#include <fmt/format.h>

namespace longhaul::wanem {

std::string HostPort::to_string() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

Status check_route_name(std::string_view name) {
  const bool ok_length = !name.empty() && name.size() <= 64;
  bool ok_chars = true;
  for (char c : name)
    ok_chars &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-';
  if (!ok_length || !ok_chars)
    return invalid_argument(
        fmt::format("bad route name '{}': use 1..64 characters of A-Z a-z 0-9 _ . -", name));
  return Status::ok();
}

Status parse_address(std::string_view text, bool allow_zero_port, HostPort* out) {
  HostPort a;
  LH_RETURN_IF_ERROR(parse_host_port(text, &a.host, &a.port));
  if (a.port == 0 && !allow_zero_port)
    return invalid_argument(fmt::format("address '{}': port 0 cannot be connected to", text));
  *out = std::move(a);
  return Status::ok();
}

Status parse_target(std::string_view text, std::optional<HostPort>* out) {
  if (text == "-") {
    out->reset();
    return Status::ok();
  }
  HostPort a;
  LH_RETURN_IF_ERROR(parse_address(text, false, &a).with_context("target"));
  *out = std::move(a);
  return Status::ok();
}

Status parse_route_spec(std::string_view text, const LinkShape& defaults, RouteSpec* out) {
  const auto fail = [&](std::string_view why) {
    return invalid_argument(
        fmt::format("bad route '{}': {} (expected NAME=LISTEN>TARGET[,key=value...], e.g. "
                    "a=127.0.0.1:0>127.0.0.1:9000,latency_ms=40)",
                    text, why));
  };
  RouteSpec spec;
  spec.shape = defaults;
  const size_t comma = text.find(',');
  const std::string_view head = text.substr(0, comma);
  const size_t eq = head.find('=');
  const size_t gt = head.find('>');
  if (eq == std::string_view::npos) return fail("no '=' after the name");
  if (gt == std::string_view::npos || gt < eq) return fail("no '>' between listen and target");
  spec.name = std::string(head.substr(0, eq));
  Status s = check_route_name(spec.name);
  if (!s) return fail(s.message());
  s = parse_address(head.substr(eq + 1, gt - eq - 1), true, &spec.listen);
  if (!s) return fail("listen " + s.message());
  s = parse_target(head.substr(gt + 1), &spec.target);
  if (!s) return fail(s.message());
  std::string_view rest = comma == std::string_view::npos ? "" : text.substr(comma + 1);
  while (comma != std::string_view::npos) {
    const size_t next = rest.find(',');
    const std::string_view kv = rest.substr(0, next);
    const size_t kv_eq = kv.find('=');
    if (kv_eq == std::string_view::npos)
      return fail(fmt::format("option '{}' is not key=value", kv));
    s = set_shape_field(&spec.shape, kv.substr(0, kv_eq), kv.substr(kv_eq + 1));
    if (!s) return fail(s.message());
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  *out = std::move(spec);
  return Status::ok();
}

}  // namespace longhaul::wanem
