// codec_device.hpp over the kernels of codec_kernels.cu.
#include <fmt/format.h>

#include "gpu/codec_device.hpp"
#include "gpu/codec_kernels.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

namespace {

using quant::Codec;

Status check_codec(Codec codec, std::size_t block_size) {
  if (!runs_on_device(codec))
    return invalid_argument(fmt::format("codec {} does not run on the device (u8, u4, e3m0 do)",
                                        quant::codec_name(codec)));
  if (block_size < 1 || block_size > quant::kMaxBlock)
    return invalid_argument(fmt::format("block {} is outside [1, 2^30]", block_size));
  return Status::ok();
}

// Runs `launch(stream)` on the compute stream of the device owning `data`, and waits for it.
template <typename Launch>
Status run_on_device(const void* data, const char* what, Launch launch) {
  LH_RETURN_IF_ERROR(cuda_available());
  const int device = device_owning(data);
  if (device < 0) return invalid_argument(fmt::format("{}: the input is not device memory", what));
  DeviceScope scope(device);
  LH_RETURN_IF_ERROR(scope.status());
  auto stream = stream_for(device, StreamRole::kCompute);
  if (!stream) return stream.status();
  LH_RETURN_IF_ERROR(cuda_check(launch(*stream), what));
  return cuda_check(cudaStreamSynchronize(*stream), what);
}

}  // namespace

Status encode_on_device(const float* in, std::size_t count, std::byte* out, Codec codec,
                        std::size_t block) {
  LH_RETURN_IF_ERROR(check_codec(codec, block));
  if (count == 0) return Status::ok();
  return run_on_device(in, "encode on the device", [&](cudaStream_t s) {
    return launch_encode(codec, in, count, block, out, s);
  });
}

Status decode_on_device(const std::byte* in, std::size_t count, float* out, Codec codec,
                        std::size_t block) {
  LH_RETURN_IF_ERROR(check_codec(codec, block));
  if (count == 0) return Status::ok();
  return run_on_device(in, "decode on the device", [&](cudaStream_t s) {
    return launch_decode(codec, in, count, block, out, s);
  });
}

}  // namespace longhaul::gpu
