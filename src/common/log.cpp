#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace longhaul::log {
namespace {

Level initial_level() {
  Level l = Level::kWarn;
  if (const char* env = std::getenv("LONGHAUL_LOG")) parse_level(env, &l);
  return l;
}

std::atomic<Level>& current() {
  static std::atomic<Level> level{initial_level()};
  return level;
}

Format initial_format() {
  Format f = Format::kText;
  if (const char* env = std::getenv("LONGHAUL_LOG_FORMAT")) parse_format(env, &f);
  return f;
}

std::atomic<Format>& current_format() {
  static std::atomic<Format> format{initial_format()};
  return format;
}

const char* name(Level l) {
  switch (l) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarn: return "WARN";
    case Level::kError: return "ERROR";
    case Level::kOff: return "OFF";
  }
  return "?";
}

}  // namespace

void set_level(Level l) { current().store(l); }
Level level() { return current().load(std::memory_order_relaxed); }

bool parse_level(std::string_view text, Level* out) {
  if (text == "debug") *out = Level::kDebug;
  else if (text == "info") *out = Level::kInfo;
  else if (text == "warn") *out = Level::kWarn;
  else if (text == "error") *out = Level::kError;
  else if (text == "off") *out = Level::kOff;
  else return false;
  return true;
}

void set_format(Format f) { current_format().store(f); }
Format format() { return current_format().load(std::memory_order_relaxed); }

bool parse_format(std::string_view text, Format* out) {
  if (text == "text") *out = Format::kText;
  else if (text == "json") *out = Format::kJson;
  else return false;
  return true;
}

std::string format_line(Level l, std::string_view component, std::string_view message) {
  const auto now = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  if (format() == Format::kText)
    return fmt::format("{:%FT%T}Z {} [{}] {}\n", now, name(l), component, message);
  std::string level = name(l);
  for (char& c : level) c = static_cast<char>(c - 'A' + 'a');
  // Invalid UTF-8 in a message (a peer's reason string) is replaced, never a broken line.
  const auto ms = now.time_since_epoch().count() % 1000;
  const nlohmann::json line = {{"ts", fmt::format("{:%FT%H:%M:%S}.{:03d}Z",
                                                  std::chrono::floor<std::chrono::seconds>(now), ms)},
                               {"level", level},
                               {"component", component},
                               {"pid", ::getpid()},
                               {"msg", message}};
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void write(Level l, std::string_view component, std::string_view message) {
  const std::string line = format_line(l, component, message);
  // A single write(2) keeps concurrent lines whole.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace longhaul::log
