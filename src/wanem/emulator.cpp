#include "wanem/emulator.hpp"

#include <fmt/format.h>

#include "common/log.hpp"

namespace longhaul::wanem {

Emulator::Emulator(asio::io_context& io, EmulatorOptions options)
    : io_(io), options_(std::move(options)) {}

Result<std::shared_ptr<Route>> Emulator::add_route(const RouteSpec& spec) {
  if (routes_.count(spec.name))
    return invalid_argument(fmt::format("route {} exists already", spec.name));
  auto route = Route::create(io_, spec, options_.seed, options_.target_timeout);
  if (!route) return route.status();
  (*route)->start();
  routes_.emplace(spec.name, *route);
  log::info("wanem", "route {}: listening on port {}, target {}, {}", spec.name, (*route)->port(),
            spec.target ? spec.target->to_string() : "not set", describe(spec.shape));
  return *route;
}

Result<std::shared_ptr<Route>> Emulator::find(std::string_view name) const {
  auto it = routes_.find(name);
  if (it != routes_.end()) return it->second;
  std::string known;
  for (const auto& [n, r] : routes_) known += (known.empty() ? "" : ", ") + n;
  return invalid_argument(
      fmt::format("no route named '{}' (routes: {})", name, known.empty() ? "none" : known));
}

Result<std::string> Emulator::apply_fault(std::string_view action, std::string_view name) {
  auto found = find(name);
  if (!found) return found.status();
  Route& route = **found;
  if (action == "reset") {
    const size_t n = route.reset();
    log::info("wanem", "route {}: reset {} connection(s)", route.name(), n);
    return fmt::format("RESET {} {}", route.name(), n);
  }
  if (action == "blackhole") {
    route.blackhole();
    log::info("wanem", "route {}: black hole (bytes held until heal)", route.name());
    return fmt::format("BLACKHOLE {}", route.name());
  }
  if (action == "heal") {
    route.heal();
    log::info("wanem", "route {}: healed", route.name());
    return fmt::format("HEAL {}", route.name());
  }
  return invalid_argument(
      fmt::format("unknown fault '{}' (known: reset, blackhole, heal)", action));
}

void Emulator::shutdown() {
  for (auto& [name, route] : routes_) route->close();
  routes_.clear();
}

}  // namespace longhaul::wanem
