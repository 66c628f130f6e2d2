// Shared-state tensors in CUDA device memory (lh_state_add_tensor with a device pointer). The
// registry holds a pinned host shadow of each. Before a sync the shadows are brought up to date
// from the device, block by block: each block's hash is taken on the device (hash_device.hpp),
// and only the blocks whose hash differs from what the shadow holds cross PCIe. After a sync
// that wrote shadows they are copied back. A state hash takes the device tensors' block hashes on
// the device and copies nothing. The hash and the wire are those of host tensors, so GPU and CPU
// peers sync with each other.
//
// A block is taken as unchanged when its XXH3-64 is: the trust the shared-state protocol already
// places in that hash, whose peers move no bytes for blocks whose hashes agree.
//
// Not thread-safe: the registry's own rule applies (no hash or sync runs beside another call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/status.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

class StateShadows {
 public:
  // A pinned shadow for a device tensor of `bytes` (not yet kept): register its data() in the
  // registry, then keep() it once the registry took it. It may be larger than `bytes` (a pooled
  // slot); only the first `bytes` are the tensor's.
  static Result<std::shared_ptr<PinnedBuffer>> make(std::size_t bytes);
  void keep(void* device, std::size_t bytes, std::shared_ptr<PinnedBuffer> shadow);

  // Brings every shadow up to date with its device tensor (before a sync), copying the blocks
  // whose hash changed since the shadow last took them (all of them the first time).
  Status pull();
  // Copies every shadow back to its device tensor (after a sync that wrote shadows).
  Status push();

  // The block hashes of every device tensor as it is now, taken on the device, by the address of
  // its shadow (the registry's tensor data).
  Result<std::map<const std::byte*, std::vector<std::uint64_t>>> device_block_hashes() const;

  // Bytes copied from the devices into the shadows so far (by pull()).
  std::uint64_t bytes_pulled() const { return bytes_pulled_; }

 private:
  struct Tensor {
    void* device;
    std::size_t bytes;
    std::shared_ptr<PinnedBuffer> shadow;
    std::vector<std::uint64_t> held;  // block hashes of what the shadow holds; empty: unknown
  };
  Status pull(Tensor& t);

  std::vector<Tensor> tensors_;
  std::uint64_t bytes_pulled_ = 0;
};

}  // namespace longhaul::gpu
