#include "wanem/commands.hpp"

#include <vector>

#include <fmt/format.h>

namespace longhaul::wanem {
namespace {

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

std::string err(const Status& s) {
  return "ERR " + s.message();
}

constexpr const char* kUsage =
    "known: route NAME LISTEN TARGET [key=value...], target NAME HOST:PORT, reset NAME, "
    "blackhole NAME, heal NAME, set NAME key=value..., stats NAME, quit";

std::string usage_error(std::string_view command) {
  return fmt::format("ERR usage: wrong arguments for '{}' ({})", command, kUsage);
}

// `route NAME LISTEN TARGET [key=value...]`
std::string add_route(Emulator& em, const std::vector<std::string_view>& w) {
  if (w.size() < 4) return usage_error(w[0]);
  RouteSpec spec;
  spec.shape = em.options().defaults;
  spec.name = std::string(w[1]);
  Status s = check_route_name(spec.name);
  if (s) s = parse_address(w[2], true, &spec.listen).with_context("listen");
  if (s) s = parse_target(w[3], &spec.target);
  for (size_t i = 4; s && i < w.size(); ++i) {
    const size_t eq = w[i].find('=');
    if (eq == std::string_view::npos)
      s = invalid_argument(fmt::format("option '{}' is not key=value", w[i]));
    else
      s = set_shape_field(&spec.shape, w[i].substr(0, eq), w[i].substr(eq + 1));
  }
  if (!s) return err(s);
  auto route = em.add_route(spec);
  if (!route) return err(route.status());
  return fmt::format("OK ROUTE {} {}", spec.name, (*route)->port());
}

std::string set_target(Emulator& em, const std::vector<std::string_view>& w) {
  if (w.size() != 3) return usage_error(w[0]);
  auto route = em.find(w[1]);
  if (!route) return err(route.status());
  HostPort target;
  Status s = parse_address(w[2], false, &target).with_context("target");
  if (!s) return err(s);
  (*route)->set_target(target);
  return fmt::format("OK TARGET {} {}", (*route)->name(), target.to_string());
}

std::string set_shape(Emulator& em, const std::vector<std::string_view>& w) {
  if (w.size() < 3) return usage_error(w[0]);
  auto route = em.find(w[1]);
  if (!route) return err(route.status());
  // Check every pair before applying any, so a typo changes nothing.
  LinkShape check = (*route)->shape();
  for (size_t i = 2; i < w.size(); ++i) {
    const size_t eq = w[i].find('=');
    if (eq == std::string_view::npos)
      return err(invalid_argument(fmt::format("'{}' is not key=value", w[i])));
    Status s = set_shape_field(&check, w[i].substr(0, eq), w[i].substr(eq + 1));
    if (!s) return err(s);
  }
  for (size_t i = 2; i < w.size(); ++i) {
    const size_t eq = w[i].find('=');
    (void)(*route)->set(w[i].substr(0, eq), w[i].substr(eq + 1));  // validated above
  }
  return fmt::format("OK SET {} {}", (*route)->name(), describe((*route)->shape()));
}

std::string stats(Emulator& em, const std::vector<std::string_view>& w) {
  if (w.size() != 2) return usage_error(w[0]);
  auto route = em.find(w[1]);
  if (!route) return err(route.status());
  const RouteStats s = (*route)->stats();
  const auto& target = (*route)->target();
  return fmt::format(
      "OK STATS {} port={} target={} state={} accepted={} open={} up_bytes={} down_bytes={} {}",
      (*route)->name(), (*route)->port(), target ? target->to_string() : "-",
      s.blackholed ? "blackhole" : "forwarding", s.accepted, s.open, s.up_bytes, s.down_bytes,
      describe((*route)->shape()));
}

}  // namespace

CommandResult execute_command(Emulator& em, std::string_view line) {
  const auto w = split_words(line);
  if (w.empty()) return {};
  const std::string_view cmd = w[0];
  if (cmd == "route") return {add_route(em, w)};
  if (cmd == "target") return {set_target(em, w)};
  if (cmd == "set") return {set_shape(em, w)};
  if (cmd == "stats") return {stats(em, w)};
  if (cmd == "reset" || cmd == "blackhole" || cmd == "heal") {
    if (w.size() != 2) return {usage_error(cmd)};
    auto done = em.apply_fault(cmd, w[1]);
    return {done ? "OK " + *done : err(done.status())};
  }
  if (cmd == "quit") {
    if (w.size() != 1) return {usage_error(cmd)};
    return {"OK QUIT", true};
  }
  return {fmt::format("ERR unknown command '{}' ({})", cmd, kUsage)};
}

}  // namespace longhaul::wanem
