// Fetches the blocks a STATE_PLAN names, from several sources at once, into the registry's
// tensors, verifying each block by hash.
//
// The blocks are cut into chunks: runs of consecutive blocks of one tensor, up to kRawChunkBlocks
// raw (a raw chunk is one DATA op received in place into the tensor, striped over the link's
// connections) or up to wire::kMaxBlocksPerCompressedFetch for blocks the plan marks
// compressible (which of those travel compressed is decided per source as the fetch goes: see
// ZstdPolicy). Every source gets its own link (the connections_per_link of the communicator) and
// up to kChunksInFlight chunks at a time; a source that finishes a chunk takes the next one it
// holds, so faster sources take more. A source whose link fails, that refuses a fetch, sends a
// block with the wrong hash, that the master declares lost (STATE_SOURCE_LOST, through
// LostSources), or makes no progress for stall_timeout (the last resort) is dropped, and its chunks
// go back to the queue for the other sources. The fetch fails (LH_ERR_PEER_LOST, or LH_ERR_TIMEOUT
// after a stall) once some chunk has no source left; it never waits for a source that is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/mutex.hpp"
#include "common/status.hpp"
#include "net/options.hpp"
#include "net/traffic.hpp"
#include "runtime/runtime.hpp"
#include "state/registry.hpp"
#include "state/zstd_choice.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::state {

inline constexpr uint32_t kRawChunkBlocks = 8;
inline constexpr size_t kChunksInFlight = 4;

struct FetchOptions {
  net::TransportOptions transport;
  uint16_t connections_per_link = 1;
  // A source with chunks in flight that completes none for this long is dropped (checked once a
  // second). sync_state takes it from LONGHAUL_STATE_STALL_TIMEOUT_MS when set (docs/state.md).
  std::chrono::milliseconds stall_timeout{30000};
  // sync_state takes it from LONGHAUL_STATE_ZSTD (auto, never, always) when set (docs/state.md).
  ZstdPolicy zstd = ZstdPolicy::kAuto;
  // Every link to a source counts its frames here (sync_state: the communicator's state traffic).
  // Null counts nothing.
  std::shared_ptr<net::TrafficCounter> traffic;
};

struct FetchStats {
  uint64_t rx_bytes = 0;
  uint64_t blocks = 0;
  uint64_t sources = 0;
};

// The sources the master declared lost during one sync (STATE_SOURCE_LOST). The session strand
// reports them, possibly before the fetch has started; the fetch listens. Thread-safe.
class LostSources {
 public:
  using Listener = std::function<void(uint64_t peer_id)>;
  void report(uint64_t peer_id);
  // Calls `listener` for every peer reported so far, then for each one reported later, until
  // stop_listening() returns (after which it is never called again).
  void listen(Listener listener);
  void stop_listening();

 private:
  Mutex mu_;
  std::vector<uint64_t> lost_ GUARDED_BY(mu_);
  Listener listener_ GUARDED_BY(mu_);
};

// Blocks until every block has arrived and been verified, or the fetch failed. When it returns no
// transfer touches the tensors any more. `lost` may be null.
//
// The links run on runtime.io() and the verification (and decompression) on runtime.workers();
// the fetch waits for every task it posted there before it returns (it never joins the shared
// pool). Must not be called on one of the runtime's threads: it blocks.
Status fetch_blocks(runtime::Runtime& runtime, const FetchOptions& options,
                    const Registry& registry, const wire::StatePlanMsg& plan, LostSources* lost,
                    FetchStats* stats);

}  // namespace longhaul::state
