#include "wanem/schedule.hpp"

#include <cmath>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <asio/steady_timer.hpp>

#include "common/log.hpp"
#include "common/parse_number.hpp"

namespace longhaul::wanem {
namespace {

Status parse_time(std::string_view text, std::chrono::milliseconds* out) {
  double scale = 0;
  std::string_view number;
  if (text.ends_with("ms")) {
    scale = 1;
    number = text.substr(0, text.size() - 2);
  } else if (text.ends_with("s")) {
    scale = 1000;
    number = text.substr(0, text.size() - 1);
  }
  double v = 0;
  if (scale == 0 || !parse_double(number, 0, 1e7, &v))
    return invalid_argument(fmt::format("bad time '{}' (use e.g. 500ms or 5s)", text));
  *out = std::chrono::milliseconds(std::llround(v * scale));
  return Status::ok();
}

}  // namespace

Status parse_schedule(std::string_view text, std::vector<ScheduledFault>* out) {
  std::vector<ScheduledFault> faults;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
    const size_t c1 = entry.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : entry.find(':', c1 + 1);
    if (c2 == std::string_view::npos)
      return invalid_argument(
          fmt::format("bad schedule entry '{}' (expected TIME:ACTION:ROUTE)", entry));
    ScheduledFault f;
    LH_RETURN_IF_ERROR(parse_time(entry.substr(0, c1), &f.at).with_context("schedule"));
    f.action = std::string(entry.substr(c1 + 1, c2 - c1 - 1));
    f.route = std::string(entry.substr(c2 + 1));
    if (f.action != "reset" && f.action != "blackhole" && f.action != "heal")
      return invalid_argument(
          fmt::format("schedule: unknown action '{}' in '{}' (known: reset, blackhole, heal)",
                      f.action, entry));
    LH_RETURN_IF_ERROR(check_route_name(f.route).with_context("schedule"));
    faults.push_back(std::move(f));
  }
  *out = std::move(faults);
  return Status::ok();
}

void arm_schedule(asio::io_context& io, Emulator& emulator,
                  const std::vector<ScheduledFault>& faults) {
  for (const ScheduledFault& f : faults) {
    auto timer = std::make_shared<asio::steady_timer>(io, f.at);
    timer->async_wait([timer, f, &emulator](const asio::error_code& ec) {
      if (ec) return;  // shutting down
      auto done = emulator.apply_fault(f.action, f.route);
      if (done)
        log::info("wanem", "schedule at {} ms: {}", f.at.count(), *done);
      else
        log::error("wanem", "schedule at {} ms: {}", f.at.count(), done.status().message());
    });
  }
}

}  // namespace longhaul::wanem
