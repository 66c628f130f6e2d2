// lh_local_group_* and lh_node_allreduce: the C face of node/ (node-local groups and the
// hierarchical all-reduce).
#include <fmt/format.h>

#include "capi/handles.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/nccl_local_group.hpp"
#include "gpu/staged_collectives.hpp"
#include "node/node_group.hpp"
#include "node/shm_local_group.hpp"

struct lh_local_group {
  lh_comm* comm = nullptr;
  std::unique_ptr<longhaul::node::NodeGroup> impl;
  bool on_device = false;  // NCCL: the buffers are device memory and are not staged
};

namespace {

namespace lh = longhaul;

// The session's options already refuse rails > 1 without a node name (node_identity.cpp).
lh::node::ShmLocalGroupOptions local_options(const lh_comm* comm, const lh_local_group_options& o) {
  const auto& c = comm->impl->options();
  lh::node::ShmLocalGroupOptions s;
  s.name = o.name ? std::string(o.name)
                  : lh::node::default_local_group_name(c.master_address, c.node, c.rails);
  s.rank = c.rail;
  s.size = c.rails;
  s.slot_bytes = o.slot_bytes;
  s.timeout = std::chrono::milliseconds(o.timeout_ms);
  return s;
}

}  // namespace

extern "C" void lh_local_group_options_init(lh_local_group_options* o) {
  if (!o) return;
  const lh::node::ShmLocalGroupOptions d;
  o->name = nullptr;
  o->slot_bytes = d.slot_bytes;
  o->timeout_ms = static_cast<uint32_t>(d.timeout.count());
  o->memory = LH_MEMORY_AUTO;
  o->device = -1;
}

extern "C" lh_status lh_local_group_create(lh_comm* comm, const lh_local_group_options* options,
                                           lh_local_group** out) {
  if (!comm || !out) return lh::capi::null_argument("lh_local_group_create");
  *out = nullptr;
  lh_local_group_options o;
  lh_local_group_options_init(&o);
  if (options) o = *options;
  if (lh::Status s = lh::capi::check_memory_kind(o.memory); !s) return lh::capi::finish(comm, s);
  const lh::node::ShmLocalGroupOptions shm = local_options(comm, o);
  auto shared = lh::node::ShmLocalGroup::create(shm);
  if (!shared) return lh::capi::finish(comm, shared.status());
  std::unique_ptr<lh::collective::LocalGroup> group = std::move(*shared);
  const bool on_device = o.memory == LH_MEMORY_CUDA;
  if (on_device) {  // the shared-memory group bootstraps NCCL and carries its agreements
    auto nccl = lh::gpu::make_nccl_local_group(std::move(group), o.device, shm.timeout);
    if (!nccl) return lh::capi::finish(comm, nccl.status());
    group = std::move(*nccl);
  }
  *out = new lh_local_group{
      comm,
      std::make_unique<lh::node::NodeGroup>(comm->impl->group(), comm->impl->collectives(),
                                            comm->impl->failures(), std::move(group)),
      on_device};
  return LH_OK;
}

extern "C" lh_status lh_local_group_abort(lh_local_group* group, const char* reason) {
  if (!group) return lh::capi::null_argument("lh_local_group_abort");
  group->impl->local().abort(lh::aborted_error(fmt::format("local group aborted by its rank {}: {}",
                                                           group->impl->local().rank(),
                                                           reason ? reason : "no reason given")));
  return LH_OK;
}

extern "C" void lh_local_group_destroy(lh_local_group* group) {
  delete group;
}

extern "C" lh_status lh_node_allreduce(lh_local_group* group, const void* send, void* recv,
                                       size_t count, lh_dtype dtype, lh_reduce_op op,
                                       const lh_allreduce_options* options, uint32_t max_attempts) {
  if (!group) return lh::capi::null_argument("lh_node_allreduce");
  lh_comm* comm = group->comm;
  auto spec = lh::capi::allreduce_spec(send, recv, count, dtype, op, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  if (count == 0) return LH_OK;
  const auto memory = lh::capi::memory_of(options);
  if (auto s = lh::gpu::residual_on_host(spec->residual, memory); !s)
    return lh::capi::finish(comm, s);
  if (group->on_device) {  // NCCL works on the device buffers themselves
    for (const void* p : {spec->input, static_cast<const void*>(spec->output)})
      if (lh::gpu::memory_of(p, memory) != lh::gpu::Memory::kCuda)
        return lh::capi::finish(
            comm, lh::invalid_argument("this local group runs in NCCL (LH_MEMORY_CUDA): "
                                       "send and recv must be device memory"));
    return lh::capi::finish(comm, group->impl->allreduce(*spec, max_attempts));
  }
  // Device buffers run through pinned host slots, landed once every node has succeeded.
  std::vector<lh::gpu::BatchBuffers> buffers{{spec->input, spec->output, spec->count}};
  auto landings = lh::gpu::stage_device_buffers(buffers, spec->dtype, memory);
  if (!landings) return lh::capi::finish(comm, landings.status());
  spec->input = buffers[0].input;
  spec->output = buffers[0].output;
  lh::Status s = group->impl->allreduce(*spec, max_attempts);
  for (const auto& land : *landings)
    if (s) s = land();
  return lh::capi::finish(comm, s);
}
