// lh_state_* and lh_sync_state: the C face of the shared-state registry and its sync.
#include <fmt/format.h>

#include "capi/handles.hpp"
#include "gpu/state_shadows.hpp"
#include "runtime/worker_pool.hpp"
#include "state/registry.hpp"
#include "state/sync.hpp"

struct lh_state {
  longhaul::state::Registry impl;
  // lh_state_hash names no communicator, so it has no runtime to borrow: it hashes on this pool,
  // started by the first lh_state_hash (idle workers block). lh_sync_state hashes on the
  // communicator's workers instead.
  std::unique_ptr<longhaul::runtime::WorkerPool> hash_workers;
  // The tensors in device memory: the registry points at their pinned host shadows.
  longhaul::gpu::StateShadows device_tensors;
  mutable longhaul::Mutex mu;
  std::string last_error GUARDED_BY(mu);
};

namespace lh = longhaul;

// A tensor in device memory is registered as a pinned host shadow (gpu/state_shadows.hpp).
static lh_status add_device_tensor(lh_state* state, const char* name, void* device, size_t count,
                                   lh::quant::DType type) {
  auto shadow = lh::gpu::StateShadows::make(count * lh::quant::element_size(type));
  if (!shadow) return lh::capi::finish(state, shadow.status());
  if (lh::Status s = state->impl.add_tensor(name, (*shadow)->data(), count, type); !s)
    return lh::capi::finish(state, s);
  state->device_tensors.keep(device, count * lh::quant::element_size(type), std::move(*shadow));
  return LH_OK;
}

extern "C" lh_status lh_state_create(lh_state** out) {
  if (!out) return lh::capi::null_argument("lh_state_create");
  *out = new lh_state();
  return LH_OK;
}

extern "C" void lh_state_destroy(lh_state* state) {
  delete state;
}

extern "C" lh_status lh_state_add_tensor(lh_state* state, const char* name, void* data,
                                         size_t count, lh_dtype dtype) {
  if (!state || !name) return lh::capi::null_argument("lh_state_add_tensor");
  if (dtype < LH_DTYPE_F32 || dtype > LH_DTYPE_U64)
    return lh::capi::finish(
        state, lh::invalid_argument(
                   fmt::format("tensor '{}': unknown dtype {}", name, static_cast<int>(dtype))));
  const auto type = static_cast<lh::quant::DType>(dtype);
  try {
    if (lh::gpu::is_device_pointer(data)) return add_device_tensor(state, name, data, count, type);
    return lh::capi::finish(state, state->impl.add_tensor(name, data, count, type));
  } catch (const std::exception& e) {
    return lh::capi::finish(state,
                            lh::internal_error(fmt::format("lh_state_add_tensor: {}", e.what())));
  }
}

extern "C" lh_status lh_state_set_revision(lh_state* state, uint64_t revision) {
  if (!state) return lh::capi::null_argument("lh_state_set_revision");
  state->impl.set_revision(revision);
  return LH_OK;
}

extern "C" lh_status lh_state_get_revision(const lh_state* state, uint64_t* revision) {
  if (!state || !revision) return lh::capi::null_argument("lh_state_get_revision");
  *revision = state->impl.revision();
  return LH_OK;
}

extern "C" lh_status lh_state_hash(lh_state* state, uint64_t* hash) {
  if (!state || !hash) return lh::capi::null_argument("lh_state_hash");
  try {
    if (!state->hash_workers) state->hash_workers = std::make_unique<lh::runtime::WorkerPool>();
    // Device tensors are hashed where they are: nothing crosses PCIe but their block hashes.
    auto on_device = state->device_tensors.device_block_hashes();
    if (!on_device) return lh::capi::finish(state, on_device.status());
    *hash = state->impl.hash(*state->hash_workers, *on_device);
    return LH_OK;
  } catch (const std::exception& e) {
    return lh::capi::finish(state, lh::internal_error(fmt::format("lh_state_hash: {}", e.what())));
  }
}

// A sync's failure is recorded on both handles: longhaul.hpp reads it from the state.
static lh_status sync_failed(lh_comm* comm, lh_state* state, const lh::Status& s) {
  lh::capi::finish(state, s);
  return lh::capi::finish(comm, s);
}

extern "C" lh_status lh_sync_state(lh_comm* comm, lh_state* state, lh_sync_strategy strategy,
                                   lh_sync_info* info) {
  if (!comm || !state) return lh::capi::null_argument("lh_sync_state");
  if (info) *info = lh_sync_info{};
  if (strategy < LH_SYNC_ENFORCE_POPULAR || strategy > LH_SYNC_SEND_ONLY)
    return sync_failed(
        comm, state,
        lh::invalid_argument(fmt::format("unknown sync strategy {}", static_cast<int>(strategy))));
  try {
    if (lh::Status pulled = state->device_tensors.pull(); !pulled)
      return sync_failed(comm, state, pulled);
    lh::state::SyncResult r;
    lh::Status s = comm->impl->state_sync().sync(state->impl,
                                                 static_cast<lh::wire::SyncStrategy>(strategy), &r);
    // Fetched blocks were written into the shadows: the device tensors take them (on failure too,
    // where the fetched tensors hold unspecified bytes, as host tensors would).
    if (r.blocks_fetched > 0) {
      if (lh::Status pushed = state->device_tensors.push(); !pushed && s) s = pushed;
    }
    if (info) {
      info->tx_bytes = r.tx_bytes;
      info->rx_bytes = r.rx_bytes;
      info->blocks_fetched = r.blocks_fetched;
      info->sources = r.sources;
      info->revision = state->impl.revision();
    }
    return s ? LH_OK : sync_failed(comm, state, s);
  } catch (const std::exception& e) {
    return sync_failed(comm, state, lh::internal_error(fmt::format("lh_sync_state: {}", e.what())));
  }
}

extern "C" const char* lh_state_last_error(const lh_state* state) {
  if (!state) return "lh_state_last_error: state is NULL";
  longhaul::MutexLock lock(state->mu);
  return state->last_error.c_str();
}
