#include "peer/staged_state.hpp"

#include <utility>

namespace longhaul::peer {

Status StagedState::add_tensor(const std::string& name, void* data, size_t count,
                               quant::DType dtype) {
  if (!gpu::is_device_pointer(data)) return registry_.add_tensor(name, data, count, dtype);
  const size_t bytes = count * quant::element_size(dtype);
  auto shadow = gpu::StateShadows::make(bytes);
  if (!shadow) return shadow.status();
  LH_RETURN_IF_ERROR(registry_.add_tensor(name, (*shadow)->data(), count, dtype));
  device_tensors_.keep(data, bytes, std::move(*shadow));
  return Status::ok();
}

Result<uint64_t> StagedState::hash() {
  if (!hash_workers_) hash_workers_ = std::make_unique<runtime::WorkerPool>();
  auto on_device = device_tensors_.device_block_hashes();
  if (!on_device) return on_device.status();
  return registry_.hash(*hash_workers_, *on_device);
}

Status StagedState::sync(state::StateSync& sync, wire::SyncStrategy strategy,
                         std::optional<state::SyncResult>* ran) {
  LH_RETURN_IF_ERROR(device_tensors_.pull());
  state::SyncResult r;
  Status s = sync.sync(registry_, strategy, &r);
  // Fetched blocks were written into the shadows: the device tensors take them.
  if (r.blocks_fetched > 0) {
    if (Status pushed = device_tensors_.push(); !pushed && s) s = pushed;
  }
  *ran = r;
  return s;
}

}  // namespace longhaul::peer
