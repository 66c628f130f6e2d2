// The peer side of a shared-state sync (docs/state.md):
//
//   1. hash every block of the registry and report the hashes, the revision and the strategy to
//      the master (STATE_REPORT); from then until STATE_COMPLETE this peer serves its blocks;
//   2. receive the plan (STATE_PLAN): refused with a reason, or the blocks to fetch and who holds
//      them;
//   3. fetch them (state/fetcher.hpp), verify each by hash, and tell the master (STATE_DONE);
//   4. wait until every fetcher of the group is done (STATE_COMPLETE), stop serving, and take the
//      group's new revision.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "common/status.hpp"
#include "peer/group.hpp"
#include "peer/mesh.hpp"
#include "peer/peer_stats.hpp"
#include "runtime/runtime.hpp"
#include "state/block_server.hpp"
#include "state/fetcher.hpp"
#include "state/registry.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::state {

struct SyncResult {
  uint64_t tx_bytes = 0;        // tensor bytes served to other peers (wire bytes)
  uint64_t rx_bytes = 0;        // tensor bytes fetched (wire bytes)
  uint64_t blocks_fetched = 0;  // blocks fetched and verified
  uint64_t sources = 0;         // distinct peers fetched from
};

// The shared-state sync as the sync engine sees it: one collective of the group that leaves every
// member's registry holding the group's content. GroupStateSync below is the network's; tests
// hold one in memory (tests/support/fake_group.hpp).
class StateSync {
 public:
  virtual ~StateSync() = default;
  // Blocks until this member's part is over. On success the registry holds the group's content at
  // its new revision; `result` is filled in either way (what was moved before a failure).
  virtual Status sync(Registry& registry, wire::SyncStrategy strategy, SyncResult* result) = 0;
};

// What a sync needs besides the control port: the runtime (the hashing uses its workers, the fetch
// its I/O threads and workers), the member's block server (one per member, owned by a shared_ptr,
// kept for all its syncs), how to fetch from the sources, and where the member's inbound state
// links arrive. Every pointer must outlive the syncs that use it.
struct StateNetwork {
  runtime::Runtime* runtime = nullptr;
  BlockServer* server = nullptr;
  // transport, connections per link and traffic: the member's. stall_timeout: the member's
  // configured one, 0 for LONGHAUL_STATE_STALL_TIMEOUT_MS or 30 s; zstd comes from
  // LONGHAUL_STATE_ZSTD at every sync (docs/state.md).
  FetchOptions fetch;
  // Sends the member's inbound service links to the handler from now on (Mesh).
  std::function<void(peer::Mesh::ServiceHandler)> route_service_links;
  // Where the synced revision and state hash are posted for the status page; null: nowhere.
  peer::StatsBoard* stats_board = nullptr;
};

// Step 1's report: every block of `registry` hashed (on `workers` and the caller), with its
// revision and the strategy, for the sync of `epoch`.
wire::StateReportMsg make_report(const Registry& registry, runtime::WorkerPool& workers,
                                 uint64_t epoch, wire::SyncStrategy strategy);

// A collective of the member's group; blocks until this peer's part is over (the protocol at the
// top of this file, through `group`'s state channel). From this call on the member's inbound state
// links go to network.server, which serves `registry` from the report until this call returns.
Status sync_state(peer::GroupControl& group, const StateNetwork& network, Registry& registry,
                  wire::SyncStrategy strategy, SyncResult* result);

// sync_state as a StateSync. `group` and what `network` points to must outlive it.
class GroupStateSync final : public StateSync {
 public:
  GroupStateSync(peer::GroupControl& group, StateNetwork network)
      : group_(group), network_(std::move(network)) {}
  Status sync(Registry& registry, wire::SyncStrategy strategy, SyncResult* result) override {
    return sync_state(group_, network_, registry, strategy, result);
  }

 private:
  peer::GroupControl& group_;
  const StateNetwork network_;
};

}  // namespace longhaul::state
