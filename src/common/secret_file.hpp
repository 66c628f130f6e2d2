// The cluster secret, read from a file (so it never appears in a process listing).
#pragma once

#include <string>

#include "common/status.hpp"

namespace longhaul {

// The shortest secret accepted without allow_weak: 16 bytes (128 bits if random).
inline constexpr size_t kMinSecretBytes = 16;

// The file's bytes without trailing line breaks; LH_ERR_IO when it cannot be read,
// LH_ERR_INVALID_ARGUMENT when nothing is left. Unless `allow_weak`, also
// LH_ERR_INVALID_ARGUMENT for a file that its group or others may read (anyone on the machine
// could join the run) or a secret shorter than kMinSecretBytes, each with how to fix it.
Result<std::string> read_secret_file(const std::string& path, bool allow_weak = false);

}  // namespace longhaul
