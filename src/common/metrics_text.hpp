// A small encoder for the Prometheus text exposition format (version 0.0.4), which /metrics of the
// master and of the peer daemons serve (docs/operations.md). Debian packages no Prometheus C++
// client; this writes only what we need: counter and gauge families with HELP and TYPE, labelled
// samples, the format's escaping rules. The tests validate its output with `promtool check
// metrics`.
//
// Usage: family() starts a family, sample() adds samples to it; text() is the document. A family
// name must match [a-zA-Z_:][a-zA-Z0-9_:]* and appear once; label names [a-zA-Z_][a-zA-Z0-9_]*
// and not start with "__". A counter's name should end in "_total" (promtool's lint). Breaking a
// rule is a programming error: the call returns LH_ERR_INVALID_ARGUMENT and writes nothing.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.hpp"

namespace longhaul {

class MetricsText {
 public:
  enum class Type { kCounter, kGauge };
  using Labels = std::vector<std::pair<std::string, std::string>>;

  Status family(std::string_view name, Type type, std::string_view help);
  // A sample of the current family (one must have been started). Label values may hold any
  // bytes; they are escaped. NaN and infinities are written as NaN, +Inf, -Inf.
  Status sample(double value, const Labels& labels = {});
  const std::string& text() const { return out_; }

  // The content type /metrics answers with.
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  std::string out_;
  std::string current_;
  std::set<std::string, std::less<>> families_;
};

}  // namespace longhaul
