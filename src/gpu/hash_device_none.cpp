// hash_device.hpp in a build without the GPU layer: there is no device memory to hash.
#include "gpu/device_memory.hpp"
#include "gpu/hash_device.hpp"

namespace longhaul::gpu {

Status hash_blocks_on_device(const void*, std::size_t, std::span<std::uint64_t>) {
  LH_RETURN_IF_ERROR(cuda_available());
  return Status(LH_ERR_UNSUPPORTED, "no CUDA device: this build has no GPU layer");
}

}  // namespace longhaul::gpu
