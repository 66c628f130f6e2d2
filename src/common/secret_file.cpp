#include "common/secret_file.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace longhaul {

Result<std::string> read_secret_file(const std::string& path, bool allow_weak) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("cannot read the secret file '{}'", path));
  struct stat st {};
  if (!allow_weak && ::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    return invalid_argument(
        fmt::format("the secret file '{}' may be read by its group or others (mode {:o}): "
                    "chmod 600 it, or allow it explicitly (--allow-weak-secret)",
                    path, st.st_mode & 0777));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return invalid_argument(fmt::format("the secret file '{}' is empty", path));
  if (!allow_weak && secret.size() < kMinSecretBytes)
    return invalid_argument(fmt::format(
        "the secret in '{}' has {} bytes, fewer than {}: use a longer one (e.g. `openssl rand "
        "-hex 32`), or allow it explicitly (--allow-weak-secret)",
        path, secret.size(), kMinSecretBytes));
  return secret;
}

}  // namespace longhaul
