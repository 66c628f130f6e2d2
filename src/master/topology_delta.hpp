// A proposal as the members of the committed epoch receive it: only what changed since that
// epoch (wire::TopologyMsg, base_epoch). The whole member list to each of N members costs the
// master N^2 bytes per round; the change costs N times its own size, which is what one master
// needs to coordinate thousands of peers (docs/scaling.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "master/ring_order.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::master {

// The change from the epoch `base_epoch`, whose rings were `base`, to the whole proposal `full`;
// nullopt when there is no base (epoch 0) or when `full` does more to a ring than take members
// out and append new ones (a ring re-solved around unreachable pairs): those receive `full`.
std::optional<wire::TopologyMsg> topology_delta(uint64_t base_epoch,
                                                const std::map<uint32_t, std::vector<PeerId>>& base,
                                                const wire::TopologyMsg& full);

}  // namespace longhaul::master
