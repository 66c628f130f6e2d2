#include "common/metrics_text.hpp"

#include <cmath>

#include <fmt/format.h>

namespace longhaul {
namespace {

bool valid_name(std::string_view name, bool colons) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colons && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

// HELP text escapes backslash and newline; label values also escape the double quote.
std::string escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{}", v);  // shortest round-trip representation
}

}  // namespace

Status MetricsText::family(std::string_view name, Type type, std::string_view help) {
  if (!valid_name(name, /*colons=*/true))
    return invalid_argument(fmt::format("metric name '{}' is not valid", name));
  if (families_.contains(name))
    return invalid_argument(fmt::format("metric family '{}' written twice", name));
  families_.emplace(name);
  current_ = name;
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape(help, false), name,
                      type == Type::kCounter ? "counter" : "gauge");
  return Status::ok();
}

Status MetricsText::sample(double value, const Labels& labels) {
  if (current_.empty()) return invalid_argument("a metric sample before its family");
  std::string line = current_;
  if (!labels.empty()) {
    line += '{';
    std::set<std::string_view> seen;
    for (size_t i = 0; i < labels.size(); ++i) {
      const auto& [key, val] = labels[i];
      if (!valid_name(key, /*colons=*/false) || key.rfind("__", 0) == 0 || !seen.insert(key).second)
        return invalid_argument(fmt::format("label name '{}' is not valid here", key));
      line += fmt::format("{}{}=\"{}\"", i ? "," : "", key, escape(val, true));
    }
    line += '}';
  }
  out_ += line + ' ' + format_value(value) + '\n';
  return Status::ok();
}

}  // namespace longhaul
