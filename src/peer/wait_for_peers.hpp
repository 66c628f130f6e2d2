// Waiting for the group to grow: lh_comm_options.min_peers and lh_comm_wait_for_peers. The wait
// admits the peers that ask to join (it calls update_topology whenever the master says one is
// pending), so the members already admitted must reach update_topology too, and wakes on the
// master's pending flag rather than polling.
#pragma once

#include <chrono>
#include <cstddef>

#include "common/status.hpp"
#include "peer/group.hpp"

namespace longhaul::peer {

// The most members a wait may ask for (a ring has at most this many).
inline constexpr size_t kMaxWaitPeers = 65536;

// Blocks until `group`'s committed ring has at least `n` members (OK at once when it has), or
// `deadline` passes (LH_ERR_TIMEOUT "the group has M of the N members <asked_by> after T ms",
// the group still usable). A re-formation in progress is waited for past the deadline. Other
// errors: update_topology's, or the group's failure. `asked_by` names the caller's setting in the
// message ("min_peers asks for", "asked for"). No other blocking call of `group` may run meanwhile.
Status wait_for_peers(GroupControl& group, size_t n, std::chrono::steady_clock::time_point deadline,
                      const char* asked_by = "asked for");

}  // namespace longhaul::peer
