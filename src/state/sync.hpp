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

#include "common/status.hpp"
#include "peer/communicator.hpp"
#include "runtime/runtime.hpp"
#include "state/block_server.hpp"
#include "state/registry.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::state {

struct SyncResult {
  uint64_t tx_bytes = 0;        // tensor bytes served to other peers (wire bytes)
  uint64_t rx_bytes = 0;        // tensor bytes fetched (wire bytes)
  uint64_t blocks_fetched = 0;  // blocks fetched and verified
  uint64_t sources = 0;         // distinct peers fetched from
};

// A collective of the communicator's peer group; blocks until this peer's part is over. On
// success the registry holds the group's content at its new revision. `result` is filled in
// either way (what was moved before a failure).
//
// `runtime` is the one `comm` runs on; the hashing uses its workers, the fetch its I/O threads
// and workers. `server` is the communicator's block server (one per communicator, owned by a
// shared_ptr, kept for all its syncs): from this call on the communicator's inbound state links go
// to it. It serves `registry` from the report until this call returns.
Status sync_state(peer::Communicator& comm, runtime::Runtime& runtime, BlockServer& server,
                  Registry& registry, wire::SyncStrategy strategy, SyncResult* result);

}  // namespace longhaul::state
