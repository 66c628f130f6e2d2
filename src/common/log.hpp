// Minimal leveled logging to stderr. One line per event, prefixed with time, level and component,
// written atomically so lines from several threads never interleave.
#pragma once

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <string_view>

namespace longhaul::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_level(Level level);
Level level();
// Parses "debug", "info", "warn", "error", "off"; false on anything else.
bool parse_level(std::string_view text, Level* out);
void write(Level level, std::string_view component, std::string_view message);

template <class... Args>
void debug(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  if (level() <= Level::kDebug) write(Level::kDebug, component, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void info(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  if (level() <= Level::kInfo) write(Level::kInfo, component, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void warn(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  if (level() <= Level::kWarn) write(Level::kWarn, component, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void error(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  if (level() <= Level::kError) write(Level::kError, component, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace longhaul::log
