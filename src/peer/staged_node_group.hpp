// A rank's node group (node/node_group.hpp) as a peer forms it: the node's local group in shared
// memory (node/shm_local_group.hpp), or in NCCL bootstrapped over it (gpu/nccl_local_group.hpp)
// when the caller's buffers are device memory, bound to the peer's rail; and its hierarchical
// all-reduce over buffers in host or device memory. Here the node decides what to stage: a
// shared-memory group runs device buffers through pinned host slots (gpu/staged_collectives.hpp),
// landed once every node has succeeded; an NCCL group works on the device buffers themselves.
// The C API's lh_local_group is one StagedNodeGroup.
//
// Threads: one call at a time (NodeGroup::allreduce); abort() from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "collective/allreduce_spec.hpp"
#include "common/status.hpp"
#include "gpu/device_memory.hpp"
#include "node/node_group.hpp"
#include "node/shm_local_group.hpp"

namespace longhaul::peer {

class Peer;

struct LocalGroupOptions {
  // The shared-memory name, the same on every rank of the node; none: the node's default
  // (node::default_local_group_name of the peer's master address, node and rails).
  std::optional<std::string> name;
  // As node::ShmLocalGroupOptions's, whose defaults these are.
  size_t slot_bytes = node::ShmLocalGroupOptions{}.slot_bytes;
  std::chrono::milliseconds timeout = node::ShmLocalGroupOptions{}.timeout;
  // kCuda: the group runs in NCCL on `device` (-1: the calling thread's current device) and every
  // all-reduce's buffers are device memory. Otherwise shared memory, device buffers staged.
  gpu::Memory memory = gpu::Memory::kAuto;
  int device = -1;
};

class StagedNodeGroup {
 public:
  // Joins the node's local group as the peer's rail (a collective call of the node: every rank
  // calls it; it blocks until all have, or the timeout) and binds it to the peer's rail group.
  // `peer` must outlive the group. Errors: ShmLocalGroup::create's, make_nccl_local_group's
  // (LH_ERR_UNSUPPORTED without CUDA, a device or NCCL).
  static Result<std::unique_ptr<StagedNodeGroup>> create(Peer& peer,
                                                         const LocalGroupOptions& options);

  // NodeGroup::allreduce of spec's buffers in `memory` (an all-reduce's spec, no reduce-scatter
  // output); nothing for count 0. An NCCL group refuses buffers that are not device memory
  // (LH_ERR_INVALID_ARGUMENT); a residual must be host memory (LH_ERR_UNSUPPORTED).
  Status allreduce(collective::AllReduceSpec spec, gpu::Memory memory, uint32_t max_attempts);
  // Aborts the local group for every rank of the node, naming this rank and `reason`.
  void abort(const std::string& reason);

 private:
  StagedNodeGroup(std::unique_ptr<node::NodeGroup> group, bool on_device);
  std::unique_ptr<node::NodeGroup> group_;
  bool on_device_ = false;  // NCCL: the buffers are device memory and are not staged
};

}  // namespace longhaul::peer
