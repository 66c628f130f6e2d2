// A communicator's node identity (CommunicatorOptions::node, rail, rails): the checks every
// claim must pass before it reaches the master, and the defaults a launcher's environment gives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.hpp"
#include "peer/options.hpp"

namespace longhaul::peer {

// What the launcher's environment says about this process's node: torchrun (and most launchers
// modelled on it) set LOCAL_RANK and LOCAL_WORLD_SIZE per process, and GROUP_RANK per machine.
struct NodeIdentity {
  std::string node;    // GROUP_RANK, or the host name when GROUP_RANK is unset
  uint32_t rail = 0;   // LOCAL_RANK
  uint32_t rails = 1;  // LOCAL_WORLD_SIZE
};

// The identity from the environment when LOCAL_RANK and LOCAL_WORLD_SIZE are both set and parse
// as numbers; nullopt otherwise (a process without a launcher is a node of one rail).
std::optional<NodeIdentity> node_from_environment();

// LH_ERR_INVALID_ARGUMENT naming the field when the options' node claim is impossible: rails
// outside 1..wire::kMaxRails, rail >= rails, rails > 1 without a node name, a name longer than
// wire::kMaxNodeNameBytes.
Status validate_node(const CommunicatorOptions& options);

}  // namespace longhaul::peer
