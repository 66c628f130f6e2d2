#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>

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

void write(Level l, std::string_view component, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  auto line = fmt::format("{:%FT%T}Z {} [{}] {}\n",
                          std::chrono::floor<std::chrono::milliseconds>(now), name(l), component,
                          message);
  // A single write(2) keeps concurrent lines whole.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace longhaul::log
