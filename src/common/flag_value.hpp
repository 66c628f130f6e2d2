// The value of a command-line flag, written "--flag=value" or "--flag value", as every longhaul
// tool accepts them.
#pragma once

#include <string>
#include <string_view>

namespace longhaul {

// For the flag at argv[*i]: strips "=value" from *flag (or takes argv[*i + 1], advancing *i) into
// *value. False when the flag has no value.
bool take_flag_value(int argc, char** argv, int* i, std::string_view* flag, std::string* value);

}  // namespace longhaul
