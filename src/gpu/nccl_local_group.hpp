// The NCCL implementation of a node's local group (node/local_group.hpp): the node's ranks
// each on its GPU, the local steps in device memory. A reduce-scatter is one ncclReduce per chunk
// (rooted at the chunk's owner, so chunks of uneven size need no padding) into a device scratch,
// then the owner's chunk is copied to the host shard; an all-gather copies the shard into its
// place in the output and broadcasts every chunk from its owner. So only 1/L of the buffer
// crosses PCIe each way, and the network step (the rails) runs on the host shard.
//
// Failure: the communicator is non-blocking (ncclConfig_t.blocking = 0), and a rank waits for
// its stream while watching the bootstrap group (the node's shared-memory group, which also
// carries NCCL's unique id from rank 0 and the outcome agreements): once that group is aborted
// (the master evicted the node, a sibling died) or the step outlives the timeout, the rank aborts
// the NCCL communicator (ncclCommAbort), so no rank waits for a dead sibling inside NCCL.
//
// NCCL is loaded at run time (nccl_library.hpp). A build without CUDA, or without nccl.h (the
// nvidia-nccl-cu13 wheel) at build time, refuses with LH_ERR_UNSUPPORTED.
#pragma once

#include <chrono>
#include <memory>

#include "common/status.hpp"
#include "node/local_group.hpp"

namespace longhaul::gpu {

// Forms the NCCL communicator of `bootstrap`'s ranks (a collective call of the node: every rank
// calls it), each on `device` (-1: the calling thread's current device). The NCCL group owns the
// bootstrap group. LH_ERR_UNSUPPORTED without CUDA, a device or NCCL; a failure on any rank fails
// it on every rank.
Result<std::unique_ptr<node::LocalGroup>> make_nccl_local_group(
    std::unique_ptr<node::LocalGroup> bootstrap, int device, std::chrono::milliseconds timeout);

}  // namespace longhaul::gpu
