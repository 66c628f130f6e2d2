// What a route's connections share: the path's shape and caps, its target, its fault state and
// its counters. Everything here is touched only from the emulator's single I/O thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <asio/any_io_executor.hpp>

#include "wanem/link_shape.hpp"
#include "wanem/notifier.hpp"
#include "wanem/rate_limiter.hpp"
#include "wanem/route_spec.hpp"

namespace longhaul::wanem {

class Connection;

// The two directions of a route. "Up" is client → target, "down" is target → client.
enum Direction : int { kUp = 0, kDown = 1 };

struct RouteState {
  explicit RouteState(asio::any_io_executor executor) : changed(std::move(executor)) {}

  std::string name;
  LinkShape shape;
  std::optional<HostPort> target;  // nullopt: not known yet; new connections wait for it
  bool blackholed = false;         // nothing moves (bytes are held) until heal
  // Notified when the target is set, on heal and when a connection ends abruptly, so connections
  // waiting on those wake up and re-check.
  Notifier changed;
  std::array<RateLimiter, 2> path_limit;  // the route's aggregate cap, per direction
  std::array<uint64_t, 2> delivered_bytes{};
  uint64_t accepted = 0;  // connections accepted so far
  uint64_t seed = 0;      // mixed with the connection id and direction for each flow's jitter
  std::chrono::milliseconds target_timeout{10'000};
  std::map<uint64_t, std::shared_ptr<Connection>> connections;  // open or waiting for a target
};

}  // namespace longhaul::wanem
