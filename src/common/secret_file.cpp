#include "common/secret_file.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace longhaul {
namespace {

// One line ending, as `echo` or an editor leaves it: "\r\n" or "\n".
void strip_one_line_ending(std::string& s) {
  if (s.ends_with("\r\n"))
    s.resize(s.size() - 2);
  else if (s.ends_with('\n'))
    s.pop_back();
}

Status check_strength(const std::string& path, const std::string& secret, bool allow_weak) {
  if (secret.empty()) return invalid_argument(fmt::format("the secret file '{}' is empty", path));
  if (secret.find('\0') != std::string::npos)
    return invalid_argument(fmt::format("the secret in '{}' holds a NUL byte", path));
  if (secret.size() > kMaxSecretBytes)
    return invalid_argument(fmt::format("the secret in '{}' has {} bytes, more than {}", path,
                                        secret.size(), kMaxSecretBytes));
  if (!allow_weak && secret.size() < kMinSecretBytes)
    return invalid_argument(fmt::format(
        "the secret in '{}' has {} bytes, fewer than {}: use a longer one (e.g. `openssl rand "
        "-hex 32`), or allow it explicitly (--allow-weak-secret)",
        path, secret.size(), kMinSecretBytes));
  return Status::ok();
}

}  // namespace

Result<std::string> read_secret_file(const std::string& path, bool allow_weak) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("cannot read the secret file '{}'", path));
  struct stat st {};
  if (!allow_weak && ::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    return invalid_argument(
        fmt::format("the secret file '{}' may be accessed by its group or others (mode {:o}): "
                    "chmod 600 it, or allow it explicitly (--allow-weak-secret)",
                    path, st.st_mode & 0777));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  strip_one_line_ending(secret);
  LH_RETURN_IF_ERROR(check_strength(path, secret, allow_weak));
  return secret;
}

}  // namespace longhaul
