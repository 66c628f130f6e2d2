// Command-line flags of longhaul-wanem.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "wanem/emulator.hpp"
#include "wanem/route_spec.hpp"
#include "wanem/schedule.hpp"
#include "wanlab/lab_spec.hpp"

namespace longhaul::wanem {

struct CliFlags {
  EmulatorOptions options;
  std::vector<RouteSpec> routes;
  std::vector<ScheduledFault> schedule;
  std::string log_level = "warn";
  // Packet-lab mode (any --site): the routes' latency/jitter/rate defaults become the paths'.
  bool lab_mode = false;
  wanlab::LabSpec lab;
};

// Parses argv into *flags. Returns the exit status when the program must stop now: 0 after
// --help, 2 after a bad flag, route or schedule (one line on stderr says which and why).
// Global defaults apply to every --route whatever the flags' order; a route's own key=value
// options override them.
std::optional<int> parse_cli_flags(int argc, char** argv, CliFlags* flags);

}  // namespace longhaul::wanem
