#include "peer/wait_for_peers.hpp"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

namespace longhaul::peer {

using Clock = std::chrono::steady_clock;

bool GroupControl::wait_for_pending(Clock::time_point deadline) const {
  while (!peers_pending() && Clock::now() < deadline)
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(10), deadline - Clock::now()));
  return peers_pending();
}

Status wait_for_peers(GroupControl& group, size_t n, Clock::time_point deadline,
                      const char* asked_by) {
  if (n > kMaxWaitPeers)
    return invalid_argument(fmt::format("cannot wait for {} peers: at most {}", n, kMaxWaitPeers));
  const auto start = Clock::now();
  for (;;) {
    LH_RETURN_IF_ERROR(group.failure());
    if (group.view().group_world_size >= n) return Status::ok();
    if (group.peers_pending()) {
      const uint64_t epoch = group.view().epoch;
      LH_RETURN_IF_ERROR(group.update_topology());
      // Pending but nothing to do (a joiner the master cannot admit yet, e.g. a node still
      // missing rails): look again a little later rather than at once.
      if (group.view().epoch == epoch && Clock::now() < deadline)
        std::this_thread::sleep_for(
            std::min<Clock::duration>(std::chrono::milliseconds(20), deadline - Clock::now()));
      continue;
    }
    if (group.wait_for_pending(deadline)) continue;  // a joiner (or a loss) to handle
    if (group.view().group_world_size >= n) return Status::ok();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return timeout_error(fmt::format("the group has {} of the {} members {} after {} ms",
                                     group.view().group_world_size, n, asked_by, waited.count()));
  }
}

}  // namespace longhaul::peer
