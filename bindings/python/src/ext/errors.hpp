// Python exceptions for longhaul's statuses, and the checks that raise them.
#pragma once

#include <nanobind/nanobind.h>

#include "longhaul/longhaul.h"

namespace longhaul::py {

// Creates longhaul.LonghaulError and its subclasses in module `m`:
//   PeerFailure       LH_ERR_PEER_LOST, LH_ERR_ABORTED (retry after update_topology)
//   NodeEvicted       LH_ERR_NODE_EVICTED (the communicator is finished)
//   StateLayoutError  LH_ERR_STATE_MISMATCH
//   Timeout           LH_ERR_TIMEOUT (also a TimeoutError)
//   Closed            LH_ERR_CLOSED
//   Unsupported       LH_ERR_UNSUPPORTED (also a ValueError)
//   MasterUnreachable LH_ERR_PEER_LOST from connect: the master could not be reached (also a
//                     ConnectionError; not a PeerFailure, which update_topology() mends)
// LH_ERR_INVALID_ARGUMENT raises ValueError; every other status LonghaulError. Each exception
// of the LonghaulError family carries `.status`, the status's name ("LH_ERR_PEER_LOST", ...).
void register_errors(nanobind::module_& m);

// Raises the exception for `status` with `message` (the library's message). Never returns.
[[noreturn]] void raise_status(lh_status status, const char* message);

// Raises for a failed status (message: the calling thread's lh_last_error); nothing on LH_OK.
inline void check(lh_status status) {
  if (status != LH_OK) raise_status(status, lh_last_error());
}

// Raises longhaul.MasterUnreachable with `message`.
[[noreturn]] void raise_master_unreachable(const char* message);

// Raises longhaul.Timeout with `message`.
[[noreturn]] void raise_timeout(const char* message);

}  // namespace longhaul::py
