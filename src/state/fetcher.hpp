// Fetches the blocks a STATE_PLAN names, from several sources at once, into the registry's
// tensors, verifying each block by hash.
//
// The blocks are cut into chunks: runs of consecutive blocks of one tensor, up to kRawChunkBlocks
// raw (a raw chunk is one DATA op received in place into the tensor, striped over the link's
// connections) or up to wire::kMaxBlocksPerCompressedFetch for blocks the plan marks
// compressible. Every source gets its own link (the connections_per_link of the communicator) and
// up to kChunksInFlight chunks at a time; a source that finishes a chunk takes the next one it
// holds, so faster sources take more. A source whose link fails, that refuses a fetch, sends a
// block with the wrong hash, or makes no progress for stall_timeout is dropped, and its chunks go
// back to the queue for the other sources. The fetch fails (LH_ERR_PEER_LOST, or LH_ERR_TIMEOUT
// after a stall) once some chunk has no source left; it never waits for a source that is gone.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/status.hpp"
#include "net/io_runtime.hpp"
#include "net/options.hpp"
#include "state/registry.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::state {

inline constexpr uint32_t kRawChunkBlocks = 8;
inline constexpr size_t kChunksInFlight = 4;

struct FetchOptions {
  net::TransportOptions transport;
  uint16_t connections_per_link = 1;
  std::chrono::milliseconds stall_timeout{30000};
};

struct FetchStats {
  uint64_t rx_bytes = 0;
  uint64_t blocks = 0;
  uint64_t sources = 0;
};

// Blocks until every block has arrived and been verified, or the fetch failed. When it returns no
// transfer touches the tensors any more.
Status fetch_blocks(net::IoRuntime& io, const FetchOptions& options, const Registry& registry,
                    const wire::StatePlanMsg& plan, FetchStats* stats);

}  // namespace longhaul::state
