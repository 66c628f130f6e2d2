// codec_device.hpp in a build without the GPU layer.
#include "gpu/codec_device.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

Status encode_on_device(const float*, std::size_t, std::byte*, quant::Codec, std::size_t) {
  return cuda_available();
}
Status decode_on_device(const std::byte*, std::size_t, float*, quant::Codec, std::size_t) {
  return cuda_available();
}

}  // namespace longhaul::gpu
