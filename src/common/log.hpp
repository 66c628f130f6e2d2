// Minimal leveled logging to stderr. One line per event, written atomically so lines from several
// threads never interleave. Two formats: text (time, level, [component], message) and JSON lines
// (one object per line: {"ts", "level", "component", "pid", "msg"}; docs/operations.md), chosen
// with set_format() or the LONGHAUL_LOG_FORMAT environment variable ("text" or "json").
#pragma once

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <string>
#include <string_view>

namespace longhaul::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

enum class Format { kText = 0, kJson = 1 };

void set_level(Level level);
void set_format(Format format);
Format format();
// Parses "text" or "json"; false on anything else.
bool parse_format(std::string_view text, Format* out);
// The line write() emits (without writing it); for tests.
std::string format_line(Level level, std::string_view component, std::string_view message);
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
