// lh_local_group_* and lh_node_allreduce: the C face of a peer's node group
// (peer/staged_node_group.hpp: node-local groups and the hierarchical all-reduce).
#include "capi/convert.hpp"
#include "capi/handles.hpp"
#include "peer/staged_node_group.hpp"

struct lh_local_group {
  lh_comm* comm = nullptr;
  std::unique_ptr<longhaul::peer::StagedNodeGroup> impl;
};

namespace lh = longhaul;

// The defaults are peer::LocalGroupOptions's; nothing is written here.
extern "C" void lh_local_group_options_init(lh_local_group_options* o) {
  if (!o) return;
  const lh::peer::LocalGroupOptions d;
  o->name = nullptr;
  o->slot_bytes = d.slot_bytes;
  o->timeout_ms = static_cast<uint32_t>(d.timeout.count());
  o->memory = LH_MEMORY_AUTO;
  o->device = d.device;
}

extern "C" lh_status lh_local_group_create(lh_comm* comm, const lh_local_group_options* options,
                                           lh_local_group** out) {
  if (!out) return lh::capi::null_argument("lh_local_group_create");
  *out = nullptr;
  if (lh_status s = lh::capi::check_handle(comm, "lh_local_group_create"); s != LH_OK) return s;
  lh_local_group_options o;
  lh_local_group_options_init(&o);
  if (options) o = *options;
  if (lh::Status s = lh::capi::check_memory_kind(o.memory); !s) return lh::capi::finish(comm, s);
  lh::peer::LocalGroupOptions local;
  if (o.name) local.name = o.name;
  local.slot_bytes = o.slot_bytes;
  local.timeout = std::chrono::milliseconds(o.timeout_ms);
  local.memory = lh::capi::memory_kind(o.memory);
  local.device = o.device;
  auto group = lh::peer::StagedNodeGroup::create(*comm->impl, local);
  if (!group) return lh::capi::finish(comm, group.status());
  *out = new lh_local_group{comm, std::move(*group)};
  return LH_OK;
}

extern "C" lh_status lh_local_group_abort(lh_local_group* group, const char* reason) {
  if (!group) return lh::capi::null_argument("lh_local_group_abort");
  group->impl->abort(reason ? reason : "no reason given");
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
  return lh::capi::finish(
      comm, group->impl->allreduce(std::move(*spec), lh::capi::memory_of(options), max_attempts));
}
