#include "common/status.hpp"

namespace longhaul {

std::string Status::to_string() const {
  std::string s = lh_status_string(code_);
  if (!message_.empty()) s += ": " + message_;
  return s;
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return {code_, context + ": " + message_};
}

}  // namespace longhaul

extern "C" const char* lh_status_string(lh_status status) {
  switch (status) {
    case LH_OK: return "LH_OK";
    case LH_ERR_INVALID_ARGUMENT: return "LH_ERR_INVALID_ARGUMENT";
    case LH_ERR_PEER_LOST: return "LH_ERR_PEER_LOST";
    case LH_ERR_ABORTED: return "LH_ERR_ABORTED";
    case LH_ERR_TIMEOUT: return "LH_ERR_TIMEOUT";
    case LH_ERR_AUTH: return "LH_ERR_AUTH";
    case LH_ERR_PROTOCOL: return "LH_ERR_PROTOCOL";
    case LH_ERR_IO: return "LH_ERR_IO";
    case LH_ERR_UNSUPPORTED: return "LH_ERR_UNSUPPORTED";
    case LH_ERR_CLOSED: return "LH_ERR_CLOSED";
    case LH_ERR_STATE_MISMATCH: return "LH_ERR_STATE_MISMATCH";
    case LH_ERR_INTERNAL: return "LH_ERR_INTERNAL";
    case LH_ERR_NODE_EVICTED: return "LH_ERR_NODE_EVICTED";
    case LH_ERR_MISMATCH: return "LH_ERR_MISMATCH";
  }
  return "LH_ERR_UNKNOWN";
}

extern "C" const char* lh_version(void) { return LONGHAUL_VERSION_STRING; }
