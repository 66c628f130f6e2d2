// Options of a peer's communicator: plain struct, documented defaults. These member defaults are
// the one place a communicator's defaults are written: lh_comm_options_init copies them from a
// default-constructed CommunicatorOptions (io_threads from runtime::RuntimeOptions), and
// longhaul.hpp's CommunicatorOptions from lh_comm_options_init.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "net/options.hpp"

namespace longhaul::peer {

// The default listen address (all interfaces, an ephemeral port); a C string so that
// lh_comm_options_init can hand it out.
inline constexpr char kDefaultListenAddress[] = "0.0.0.0:0";

struct CommunicatorOptions {
  // The master's "host:port" (IPv6 as "[addr]:port"). Required.
  std::string master_address;
  // The peer group this communicator reduces with (e.g. one per FSDP shard). Membership and epochs
  // are global; rings are per group.
  uint32_t group = 0;
  // TCP connections per peer-to-peer data link (payloads are striped over them). 1..64.
  uint16_t connections_per_link = 1;
  // Cluster secret and TLS, used for the master link and the peer links alike. With TLS on, the
  // peer's own listener serves tls.cert_file/key_file, so both must be set. The role is forced to
  // kPeer. The handshake deadline's default is net::TransportOptions's.
  net::TransportOptions transport;
  // Where this peer listens for its ring neighbours' data links; port 0 = ephemeral.
  std::string listen_address = kDefaultListenAddress;
  // What the other peers should connect to: "host:port", or "host" (the listener's port), or
  // empty (the address the master sees this peer connect from, and the listener's port). Set it
  // behind NAT with a forwarded port.
  std::string advertised_address;
  // connect() gives up after this long without being admitted.
  std::chrono::milliseconds connect_timeout{30000};
  // Setting up the links to the ring neighbours of a new epoch; a neighbour not linked by then is
  // reported unreachable.
  std::chrono::milliseconds link_timeout{10000};
  // Link to every member of the group, not only the ring neighbours, so the direct all-reduce
  // schedule can run (it sends each chunk straight to its owner). Costs N-1 links per peer.
  bool full_mesh = false;
  // The node (machine) this communicator is one rank of, and its rail among the node's `rails`
  // (docs/protocol.md, "Nodes"): the master admits, moves and evicts all rails of a node
  // together. Empty node: a node of one rail, as a peer without a node always was.
  std::string node;
  uint32_t rail = 0;
  uint32_t rails = 1;
  // When the control link to the master breaks after admission (the master crashed, restarts, or
  // the path to it failed), the session keeps its epoch, ring and data links, fails the
  // collectives in flight with LH_ERR_ABORTED (retryable), and reconnects with backoff for up to
  // this long, then rejoins the (restarted) master with its view of the run (REJOIN). 0: a lost
  // master ends the session at once (LH_ERR_PEER_LOST).
  std::chrono::milliseconds master_reconnect_timeout{60000};
  // A state sync drops a source that delivers nothing for this long. 0: the environment's
  // LONGHAUL_STATE_STALL_TIMEOUT_MS if set, else 30 s (state/sync.cpp).
  std::chrono::milliseconds state_stall_timeout{0};
  // Peer::connect returns once the group has this many members (wait_for_peers.hpp), within
  // connect_timeout. 0 and 1: admission is enough. Only the start waits: a group that shrinks
  // later works on with fewer.
  uint32_t min_peers = 0;
};

}  // namespace longhaul::peer
