// Command-line flags of longhaul-wanem.
#pragma once

#include <string>
#include <vector>

#include "common/status.hpp"
#include "wanem/emulator.hpp"
#include "wanem/route_spec.hpp"
#include "wanem/schedule.hpp"

namespace longhaul::wanem {

struct CliFlags {
  EmulatorOptions options;
  std::vector<RouteSpec> routes;
  std::vector<ScheduledFault> schedule;
  std::string log_level = "warn";
  bool help = false;
};

// Global defaults apply to every --route whatever the flags' order; a route's own key=value
// options override them.
Status parse_cli_flags(int argc, char** argv, CliFlags* flags);

void print_help();

}  // namespace longhaul::wanem
