// The launcher of hash_kernels.cu, for hash_device_cuda.cpp: queues the block-hash kernel on
// `stream` (`data` and `out` device memory; `out` holds one hash per state::kBlockBytes block).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace longhaul::gpu {

cudaError_t launch_hash_blocks(const std::uint8_t* data, std::size_t bytes, std::uint64_t* out,
                               cudaStream_t stream);

}  // namespace longhaul::gpu
