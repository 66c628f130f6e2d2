// The cluster secret, read from a file (so it never appears in a process listing).
#pragma once

#include <string>

#include "common/status.hpp"

namespace longhaul {

// The file's bytes without trailing line breaks; LH_ERR_IO when it cannot be read,
// LH_ERR_INVALID_ARGUMENT when nothing is left.
Result<std::string> read_secret_file(const std::string& path);

}  // namespace longhaul
