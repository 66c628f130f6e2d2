// The cluster secret, read from a file (so it never appears in a process listing). One reader for
// every side: the master daemon's --secret-file, the other tools' and the library's
// lh_secret_from_file (longhaul.h), so a file that authenticates the master authenticates a peer.
#pragma once

#include <string>

#include "common/status.hpp"

namespace longhaul {

// The shortest secret accepted without allow_weak: 16 bytes (128 bits if random).
inline constexpr size_t kMinSecretBytes = 16;
// The longest secret a file may hold.
inline constexpr size_t kMaxSecretBytes = 4096;

// The file's bytes with one line ending removed from the end, if there is one: a final "\r\n",
// else a final "\n"; nothing else (spaces stay, "s\n\n" gives "s\n"). LH_ERR_IO when it cannot be
// read; LH_ERR_INVALID_ARGUMENT when nothing is left, for a NUL byte (the secret is a C string in
// the options) or more than kMaxSecretBytes. Unless `allow_weak`, also LH_ERR_INVALID_ARGUMENT for
// a file that its group or others may access (anyone on the machine could join the run) or a
// secret shorter than kMinSecretBytes. Each message says how to fix it.
Result<std::string> read_secret_file(const std::string& path, bool allow_weak = false);

}  // namespace longhaul
