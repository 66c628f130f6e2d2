// The blockwise codecs (u8, u4, E3M0; quant/codec.hpp has the format) run by GPU kernels on device
// memory. The per-block arithmetic is quant/block_codec.hpp, the source the CPU encoders use, so
// the bytes are the CPU's bit for bit (gpu_codec_test holds them to quant::encode_portable, NaN,
// Inf, denormals and ties included).
//
// Both calls run on the compute stream of the device that owns `in` and return once the kernel
// has finished. `in` and `out` are device memory of the sizes quant::encoded_size gives; they must
// not overlap. Errors: LH_ERR_INVALID_ARGUMENT for a codec other than kU8/kU4/kE3M0 or a block
// outside [1, quant::kMaxBlock]; LH_ERR_UNSUPPORTED without a CUDA device; the runtime's error
// when a launch fails. Thread-safe.
#pragma once

#include <cstddef>

#include "common/status.hpp"
#include "quant/codec.hpp"

namespace longhaul::gpu {

// Whether `codec` has device kernels: the blockwise ones (fp16 and bf16 are converted on the CPU).
constexpr bool runs_on_device(quant::Codec codec) {
  return codec == quant::Codec::kU8 || codec == quant::Codec::kU4 || codec == quant::Codec::kE3M0;
}

Status encode_on_device(const float* in, std::size_t count, std::byte* out, quant::Codec codec,
                        std::size_t block = quant::kDefaultBlock);

Status decode_on_device(const std::byte* in, std::size_t count, float* out, quant::Codec codec,
                        std::size_t block = quant::kDefaultBlock);

}  // namespace longhaul::gpu
