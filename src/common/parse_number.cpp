#include "common/parse_number.hpp"

#include <charconv>
#include <cmath>

namespace longhaul {

bool parse_u64(std::string_view text, uint64_t min, uint64_t max, uint64_t* out) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) return false;
  *out = v;
  return true;
}

bool parse_double(std::string_view text, double min, double max, double* out) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < min ||
      v > max)
    return false;
  *out = v;
  return true;
}

}  // namespace longhaul
