// hash_device.hpp over the kernel of hash_kernels.cu.
#include <fmt/format.h>

#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/hash_device.hpp"
#include "gpu/hash_kernels.hpp"
#include "state/block_hash.hpp"

namespace longhaul::gpu {

Status hash_blocks_on_device(const void* device, std::size_t bytes, std::span<std::uint64_t> out) {
  const std::size_t blocks = state::block_count(bytes);
  if (out.size() != blocks)
    return invalid_argument(fmt::format("{} bytes are {} blocks, and there is room for {} hashes",
                                        bytes, blocks, out.size()));
  if (blocks == 0) return Status::ok();
  LH_RETURN_IF_ERROR(cuda_available());
  const int owner = device_owning(device);
  if (owner < 0) return invalid_argument("hash on the device: the input is not device memory");
  DeviceScope scope(owner);
  LH_RETURN_IF_ERROR(scope.status());
  auto stream = stream_for(owner, StreamRole::kCompute);
  if (!stream) return stream.status();
  void* hashes = nullptr;
  LH_RETURN_IF_ERROR(cuda_check(cudaMallocAsync(&hashes, blocks * sizeof(std::uint64_t), *stream),
                                "hash on the device: cudaMallocAsync"));
  Status s = cuda_check(launch_hash_blocks(static_cast<const std::uint8_t*>(device), bytes,
                                           static_cast<std::uint64_t*>(hashes), *stream),
                        "hash on the device");
  if (s)
    s = cuda_check(cudaMemcpyAsync(out.data(), hashes, blocks * sizeof(std::uint64_t),
                                   cudaMemcpyDeviceToHost, *stream),
                   "hash on the device: copy of the hashes");
  const Status freed = cuda_check(cudaFreeAsync(hashes, *stream), "hash on the device: free");
  const Status done = cuda_check(cudaStreamSynchronize(*stream), "hash on the device");
  if (!s) return s;
  return !freed ? freed : done;
}

}  // namespace longhaul::gpu
