// The command line of one peer process of a churn run: a longhaul-peer daemon, or a longhaul-train
// peer (the train workload). The tool's defaults come first and are left out where the user's
// --peer-arg / --train-arg gives the same flag, so what the user passes always wins.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "churn_flags.hpp"

namespace longhaul_churn {

struct PeerLaunch {
  std::string binary;           // longhaul-peer or longhaul-train
  uint16_t master_port = 0;     // the master, or its route through longhaul-wanem
  uint16_t advertise_port = 0;  // > 0: routed through longhaul-wanem, advertised on this port
  // Train: the data shard (longhaul-train --peer-index), whether it joins a running group
  // (a replacement), and its output directory.
  int shard = 0;
  bool join = false;
  std::string out_dir;
  // Nodes: the rank's node name and rail (longhaul-peer --node/--rail/--rails); "" for none.
  std::string node;
  uint32_t rail = 0;
  std::vector<std::string> security;  // --tls-cert/--tls-key, --secret-file of the run
};

// Where a peer runs: loopback, or in the packet lab (--sites) the master's address, the peer's
// own, and its network namespace (the command then starts with `ip netns exec NETNS`).
struct PeerPlace {
  std::string master_host = "127.0.0.1";
  std::string listen_host = "127.0.0.1";
  std::string netns;  // empty: the churn tool's own
};

std::vector<std::string> peer_command(const Flags& flags, const PeerLaunch& launch,
                                      const PeerPlace& place = {});

}  // namespace longhaul_churn
