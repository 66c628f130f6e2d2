// The set of routes of one longhaul-wanem process, by name. Runs on one io_context thread; every
// method must be called there.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>

#include "common/status.hpp"
#include "wanem/route.hpp"
#include "wanem/route_spec.hpp"

namespace longhaul::wanem {

struct EmulatorOptions {
  LinkShape defaults;  // shape of routes that do not set their own fields
  uint64_t seed = 1;   // jitter seed; the same seed replays the same delays per connection
  std::chrono::milliseconds target_timeout{10'000};  // how long a connection waits for a target
};

class Emulator {
 public:
  Emulator(asio::io_context& io, EmulatorOptions options);

  const EmulatorOptions& options() const { return options_; }

  // Binds and starts a route; refuses a name already in use.
  Result<std::shared_ptr<Route>> add_route(const RouteSpec& spec);
  // The route called `name`, or an error naming the routes that exist.
  Result<std::shared_ptr<Route>> find(std::string_view name) const;
  // "reset", "blackhole" or "heal" on the named route (commands and the schedule share this).
  Result<std::string> apply_fault(std::string_view action, std::string_view name);
  // Closes every route and connection; the io_context then runs out of work.
  void shutdown();

 private:
  asio::io_context& io_;
  EmulatorOptions options_;
  std::map<std::string, std::shared_ptr<Route>, std::less<>> routes_;
};

}  // namespace longhaul::wanem
