// A peer's shared-state registry (state/registry.hpp) over tensors in host or CUDA device memory.
// Here the state decides what to stage: a tensor in device memory is registered as a pinned host
// shadow (gpu/state_shadows.hpp), brought up to date from the device before a sync and copied
// back after one that fetched blocks; a hash takes the device tensors' block hashes on the device,
// so nothing crosses PCIe but those. The C API's lh_state is one StagedState.
//
// Not thread-safe: the registry's rule applies (no hash or sync runs beside another call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.hpp"
#include "gpu/state_shadows.hpp"
#include "quant/dtype.hpp"
#include "runtime/worker_pool.hpp"
#include "state/registry.hpp"
#include "state/sync.hpp"

namespace longhaul::peer {

class StagedState {
 public:
  // Registry::add_tensor of `count` elements of `dtype` at `data`; a device tensor through a new
  // pinned shadow (the runtime's error when it cannot be allocated).
  Status add_tensor(const std::string& name, void* data, size_t count, quant::DType dtype);
  uint64_t revision() const { return registry_.revision(); }
  void set_revision(uint64_t revision) { registry_.set_revision(revision); }

  // Registry::hash. This state names no peer, so it has no runtime to borrow: it hashes on a pool
  // of its own, started by the first call (idle workers block). Errors: a device hash's.
  Result<uint64_t> hash();
  // `sync`'s sync (StateSync::sync) of this registry, the device tensors pulled into their
  // shadows first and, once blocks were fetched, pushed back (on failure too: the fetched tensors
  // then hold unspecified bytes, as host tensors would). `*ran` is set once the sync ran, whether
  // it succeeded or failed, and stays empty when pulling the device tensors failed.
  Status sync(state::StateSync& sync, wire::SyncStrategy strategy,
              std::optional<state::SyncResult>* ran);

 private:
  state::Registry registry_;
  std::unique_ptr<runtime::WorkerPool> hash_workers_;
  gpu::StateShadows device_tensors_;
};

}  // namespace longhaul::peer
