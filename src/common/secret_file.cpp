#include "common/secret_file.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace longhaul {

Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("cannot read the secret file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return invalid_argument(fmt::format("the secret file '{}' is empty", path));
  return secret;
}

}  // namespace longhaul
