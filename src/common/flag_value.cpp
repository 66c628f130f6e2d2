#include "common/flag_value.hpp"

namespace longhaul {

bool take_flag_value(int argc, char** argv, int* i, std::string_view* flag, std::string* value) {
  if (auto eq = flag->find('='); eq != std::string_view::npos && flag->starts_with("--")) {
    *value = std::string(flag->substr(eq + 1));
    *flag = flag->substr(0, eq);
    return true;
  }
  if (*i + 1 >= argc) return false;
  *value = argv[++*i];
  return true;
}

}  // namespace longhaul
