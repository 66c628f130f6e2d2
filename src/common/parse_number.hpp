// A whole string read as one number, as flags and specs spell them: decimal, no sign, no spaces,
// nothing after the number.
#pragma once

#include <cstdint>
#include <string_view>

namespace longhaul {

// True, with *out set, when `text` is a whole number in [min, max].
bool parse_u64(std::string_view text, uint64_t min, uint64_t max, uint64_t* out);
// True, with *out set, when `text` is a finite number in [min, max] ("2.5", "1e3").
bool parse_double(std::string_view text, double min, double max, double* out);

}  // namespace longhaul
