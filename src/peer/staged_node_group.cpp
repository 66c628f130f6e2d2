#include "peer/staged_node_group.hpp"

#include <functional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpu/nccl_local_group.hpp"
#include "gpu/staged_collectives.hpp"
#include "peer/peer.hpp"

namespace longhaul::peer {
namespace {

// The session's options already refuse rails > 1 without a node name (node_identity.cpp).
node::ShmLocalGroupOptions shm_options(const CommunicatorOptions& c, const LocalGroupOptions& o) {
  node::ShmLocalGroupOptions s;
  s.name = o.name ? *o.name : node::default_local_group_name(c.master_address, c.node, c.rails);
  s.rank = c.rail;
  s.size = c.rails;
  s.slot_bytes = o.slot_bytes;
  s.timeout = o.timeout;
  return s;
}

}  // namespace

StagedNodeGroup::StagedNodeGroup(std::unique_ptr<node::NodeGroup> group, bool on_device)
    : group_(std::move(group)), on_device_(on_device) {}

Result<std::unique_ptr<StagedNodeGroup>> StagedNodeGroup::create(Peer& peer,
                                                                 const LocalGroupOptions& options) {
  const node::ShmLocalGroupOptions shm = shm_options(peer.options(), options);
  auto shared = node::ShmLocalGroup::create(shm);
  if (!shared) return shared.status();
  std::unique_ptr<node::LocalGroup> local = std::move(*shared);
  const bool on_device = options.memory == gpu::Memory::kCuda;
  if (on_device) {  // the shared-memory group bootstraps NCCL and carries its agreements
    auto nccl = gpu::make_nccl_local_group(std::move(local), options.device, shm.timeout);
    if (!nccl) return nccl.status();
    local = std::move(*nccl);
  }
  auto group = std::make_unique<node::NodeGroup>(peer.group(), peer.collectives(), peer.failures(),
                                                 std::move(local));
  return std::unique_ptr<StagedNodeGroup>(new StagedNodeGroup(std::move(group), on_device));
}

Status StagedNodeGroup::allreduce(collective::AllReduceSpec spec, gpu::Memory memory,
                                  uint32_t max_attempts) {
  if (spec.count == 0) return Status::ok();
  LH_RETURN_IF_ERROR(gpu::residual_on_host(spec.residual, memory));
  if (on_device_) {  // NCCL works on the device buffers themselves
    for (const void* p : {spec.input, static_cast<const void*>(spec.output)})
      if (gpu::memory_of(p, memory) != gpu::Memory::kCuda)
        return invalid_argument(
            "this local group runs in NCCL (LH_MEMORY_CUDA): send and recv must be device memory");
    return group_->allreduce(spec, max_attempts);
  }
  // Device buffers run through pinned host slots, landed once every node has succeeded.
  std::vector<gpu::BatchBuffers> buffers{{spec.input, spec.output, spec.count}};
  auto landings = gpu::stage_device_buffers(buffers, spec.dtype, memory);
  if (!landings) return landings.status();
  spec.input = buffers[0].input;
  spec.output = buffers[0].output;
  Status s = group_->allreduce(spec, max_attempts);
  for (const auto& land : *landings)
    if (s) s = land();
  return s;
}

void StagedNodeGroup::abort(const std::string& reason) {
  node::LocalGroup& local = group_->local();
  local.abort(
      aborted_error(fmt::format("local group aborted by its rank {}: {}", local.rank(), reason)));
}

}  // namespace longhaul::peer
