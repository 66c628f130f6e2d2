#include "gpu/state_shadows.hpp"

#include <utility>

#include "gpu/pinned_pool.hpp"

namespace longhaul::gpu {

Result<std::shared_ptr<PinnedBuffer>> StateShadows::make(std::size_t bytes) {
  return acquire_pinned(bytes);
}

void StateShadows::keep(void* device, std::shared_ptr<PinnedBuffer> shadow) {
  tensors_.push_back({device, std::move(shadow)});
}

Status StateShadows::pull() const {
  for (const Tensor& t : tensors_)
    LH_RETURN_IF_ERROR(copy_to_host(t.shadow->data(), t.device, t.shadow->size()));
  return Status::ok();
}

Status StateShadows::push() const {
  for (const Tensor& t : tensors_)
    LH_RETURN_IF_ERROR(copy_to_device(t.device, t.shadow->data(), t.shadow->size()));
  return Status::ok();
}

}  // namespace longhaul::gpu
