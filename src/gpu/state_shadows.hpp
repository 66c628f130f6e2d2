// Shared-state tensors in CUDA device memory (lh_state_add_tensor with a device pointer). The
// registry holds a pinned host shadow of each; the shadows are refreshed from the device before
// the state is hashed or synced, and copied back to the device after a sync that wrote them. The
// hash and the wire are those of host tensors, so GPU and CPU peers sync with each other.
//
// Not thread-safe: the registry's own rule applies (no hash or sync runs beside another call).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "common/status.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

class StateShadows {
 public:
  // A pinned shadow of `bytes` for the device tensor at `device` (not yet kept): register its
  // data() in the registry, then keep() it once the registry took it.
  static Result<std::shared_ptr<PinnedBuffer>> make(std::size_t bytes);
  void keep(void* device, std::shared_ptr<PinnedBuffer> shadow);

  // Copies every device tensor into its shadow (before a hash or a sync).
  Status pull() const;
  // Copies every shadow back to its device tensor (after a sync that wrote tensors).
  Status push() const;

 private:
  struct Tensor {
    void* device;
    std::shared_ptr<PinnedBuffer> shadow;
  };
  std::vector<Tensor> tensors_;
};

}  // namespace longhaul::gpu
