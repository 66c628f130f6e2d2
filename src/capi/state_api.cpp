// lh_state_* and lh_sync_state: the C face of the shared-state registry and its sync.
#include <optional>

#include <fmt/format.h>

#include "capi/handles.hpp"
#include "peer/staged_state.hpp"

// A registry whose device tensors the peer layer stages (peer/staged_state.hpp).
struct lh_state {
  longhaul::peer::StagedState impl;
  mutable longhaul::Mutex mu;
  std::string last_error GUARDED_BY(mu);
};

namespace lh = longhaul;

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
    auto h = state->impl.hash();
    if (!h) return lh::capi::finish(state, h.status());
    *hash = *h;
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
  if (lh::Status s = lh::capi::open_status(comm, "lh_sync_state"); !s)
    return sync_failed(comm, state, s);
  if (strategy < LH_SYNC_ENFORCE_POPULAR || strategy > LH_SYNC_SEND_ONLY)
    return sync_failed(
        comm, state,
        lh::invalid_argument(fmt::format("unknown sync strategy {}", static_cast<int>(strategy))));
  try {
    std::optional<lh::state::SyncResult> ran;
    lh::Status s = state->impl.sync(comm->impl->state_sync(),
                                    static_cast<lh::wire::SyncStrategy>(strategy), &ran);
    if (info && ran) {
      info->tx_bytes = ran->tx_bytes;
      info->rx_bytes = ran->rx_bytes;
      info->blocks_fetched = ran->blocks_fetched;
      info->sources = ran->sources;
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
