// The launchers of codec_kernels.cu, for codec_device_cuda.cpp: each queues one kernel on
// `stream` and returns the launch's error. Arguments are checked by the caller (codec u8, u4 or
// e3m0; block in [1, kMaxBlock]; count > 0; `in` and `out` device memory of the encoded sizes).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "quant/codec.hpp"

namespace longhaul::gpu {

cudaError_t launch_encode(quant::Codec codec, const float* in, std::size_t count,
                          std::size_t block_size, std::byte* out, cudaStream_t stream);
cudaError_t launch_decode(quant::Codec codec, const std::byte* in, std::size_t count,
                          std::size_t block_size, float* out, cudaStream_t stream);

}  // namespace longhaul::gpu
