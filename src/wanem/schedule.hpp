// Faults at fixed times after start: `--schedule "5s:reset:a,8s:blackhole:a,12s:heal:a"`.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <asio/io_context.hpp>

#include "common/status.hpp"
#include "wanem/emulator.hpp"

namespace longhaul::wanem {

struct ScheduledFault {
  std::chrono::milliseconds at{0};  // after the schedule is armed
  std::string action;               // reset, blackhole or heal
  std::string route;
};

// Comma-separated TIME:ACTION:ROUTE entries; TIME is a decimal number with unit ms or s.
Status parse_schedule(std::string_view text, std::vector<ScheduledFault>* out);

// Runs each fault on `emulator` at its time from now (logged to stderr; no stdout line, so the
// answers to commands stay one per command).
void arm_schedule(asio::io_context& io, Emulator& emulator,
                  const std::vector<ScheduledFault>& faults);

}  // namespace longhaul::wanem
