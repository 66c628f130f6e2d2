// The blockwise encoders and decoders as CUDA kernels (codec_device.hpp is their interface). One
// warp encodes one block: its lanes scan the block's keys, a warp reduction (an integer min/max, so
// the order of the lanes does not matter) gives every lane the same key range, each lane derives
// the same header from it with block_codec.hpp, and writes the codes of its elements. Decoding is
// one thread per element.
//
// Built with --fmad=false and nvcc's IEEE defaults (block_codec.hpp says why); src/gpu's
// CMakeLists.txt sets them. Only CUDA and the shared arithmetic here: the checks and the errors,
// which use fmt (its consteval format strings do not pass nvcc), are in codec_device_cuda.cpp.
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>

#include "gpu/codec_kernels.hpp"
#include "quant/block_codec.hpp"

namespace longhaul::gpu {

namespace {

using quant::Codec;
namespace block = quant::block;

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kWarpsPerCta = 8;

// Header bytes and encoded bytes of a block of n elements (codec_layout.hpp, e3m0.hpp).
template <Codec C>
__host__ __device__ constexpr std::size_t header_bytes() {
  return C == Codec::kE3M0 ? sizeof(float) : 2 * sizeof(float);
}
template <Codec C>
__host__ __device__ constexpr std::size_t block_bytes(std::size_t n) {
  return header_bytes<C>() + (C == Codec::kU8 ? n : (n + 1) / 2);
}

template <Codec C>
__device__ void encode_minmax_block(const float* __restrict x, std::size_t n,
                                    std::byte* __restrict out, unsigned lane) {
  constexpr std::int32_t kLevels = C == Codec::kU8 ? 255 : 15;
  int kmin = INT_MAX;
  int kmax = INT_MIN;
  for (std::size_t i = lane; i < n; i += 32) {
    const int k = block::order_key(x[i]);
    kmin = k < kmin ? k : kmin;
    kmax = k > kmax ? k : kmax;
  }
  kmin = __reduce_min_sync(kFullMask, kmin);
  kmax = __reduce_max_sync(kFullMask, kmax);
  const block::MinMaxParams p = block::minmax_params(kmin, kmax, static_cast<float>(kLevels));
  if (lane == 0) {
    memcpy(out, &p.lo, sizeof(float));
    memcpy(out + sizeof(float), &p.scale, sizeof(float));
  }
  auto* __restrict codes = reinterpret_cast<std::uint8_t*>(out + header_bytes<C>());
  if constexpr (C == Codec::kU8) {
    for (std::size_t i = lane; i < n; i += 32)
      codes[i] = p.finite ? static_cast<std::uint8_t>(block::quantize<kLevels>(x[i], p.lo, p.inv))
                          : std::uint8_t{0};
  } else {
    for (std::size_t j = lane; j < (n + 1) / 2; j += 32) {
      std::uint32_t q = 0;
      if (p.finite) {
        q = block::quantize<kLevels>(x[2 * j], p.lo, p.inv);
        if (2 * j + 1 < n) q |= block::quantize<kLevels>(x[2 * j + 1], p.lo, p.inv) << 4;
      }
      codes[j] = static_cast<std::uint8_t>(q);
    }
  }
}

__device__ void encode_e3m0_block(const float* __restrict x, std::size_t n,
                                  std::byte* __restrict out, unsigned lane) {
  unsigned max_key = 0;
  for (std::size_t i = lane; i < n; i += 32) {
    const unsigned k = block::magnitude_key(x[i]);
    max_key = k > max_key ? k : max_key;
  }
  max_key = __reduce_max_sync(kFullMask, max_key);
  const block::E3m0Encoding e = block::e3m0_encoding(max_key);
  if (lane == 0) memcpy(out, &e.header, sizeof(float));
  auto* __restrict codes = reinterpret_cast<std::uint8_t*>(out + sizeof(float));
  for (std::size_t j = lane; j < (n + 1) / 2; j += 32) {
    std::uint32_t c = block::e3m0_code(x[2 * j], e);
    if (2 * j + 1 < n) c |= block::e3m0_code(x[2 * j + 1], e) << 4;
    codes[j] = static_cast<std::uint8_t>(c);
  }
}

template <Codec C>
__global__ void encode_kernel(const float* __restrict x, std::size_t count, std::size_t block_size,
                              std::size_t blocks, std::byte* __restrict out) {
  const std::size_t b = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  if (b >= blocks) return;  // whole warps: blockDim.x is a multiple of 32
  const std::size_t begin = b * block_size;
  const std::size_t n = count - begin < block_size ? count - begin : block_size;
  std::byte* const o = out + b * block_bytes<C>(block_size);
  if constexpr (C == Codec::kE3M0) {
    encode_e3m0_block(x + begin, n, o, lane);
  } else {
    encode_minmax_block<C>(x + begin, n, o, lane);
  }
}

template <Codec C>
__global__ void decode_kernel(const std::byte* __restrict in, std::size_t count,
                              std::size_t block_size, float* __restrict out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const std::size_t b = i / block_size;
  const std::size_t k = i - b * block_size;
  const std::byte* const h = in + b * block_bytes<C>(block_size);
  const auto* codes = reinterpret_cast<const std::uint8_t*>(h + header_bytes<C>());
  const std::uint32_t c = C == Codec::kU8 ? codes[k] : (codes[k / 2] >> (4 * (k % 2))) & 15u;
  float first;
  memcpy(&first, h, sizeof first);
  if constexpr (C == Codec::kE3M0) {
    out[i] = block::e3m0_value(c, first);
  } else {
    float scale;
    memcpy(&scale, h + sizeof(float), sizeof scale);
    // A NaN block decodes to its stored quiet NaN. lo + q * scale gives that on x86, which returns
    // a NaN operand's bits, but the GPU returns its canonical NaN 0x7FFFFFFF instead.
    out[i] = first != first ? first : block::dequantize(c, first, scale);
  }
}

}  // namespace

cudaError_t launch_encode(Codec codec, const float* in, std::size_t count, std::size_t block_size,
                          std::byte* out, cudaStream_t stream) {
  const std::size_t blocks = (count + block_size - 1) / block_size;
  const auto ctas = static_cast<unsigned>((blocks + kWarpsPerCta - 1) / kWarpsPerCta);
  constexpr unsigned kThreads = 32 * kWarpsPerCta;
  if (codec == Codec::kU8)
    encode_kernel<Codec::kU8><<<ctas, kThreads, 0, stream>>>(in, count, block_size, blocks, out);
  else if (codec == Codec::kU4)
    encode_kernel<Codec::kU4><<<ctas, kThreads, 0, stream>>>(in, count, block_size, blocks, out);
  else
    encode_kernel<Codec::kE3M0><<<ctas, kThreads, 0, stream>>>(in, count, block_size, blocks, out);
  return cudaGetLastError();
}

cudaError_t launch_decode(Codec codec, const std::byte* in, std::size_t count,
                          std::size_t block_size, float* out, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const auto ctas = static_cast<unsigned>((count + kThreads - 1) / kThreads);
  if (codec == Codec::kU8)
    decode_kernel<Codec::kU8><<<ctas, kThreads, 0, stream>>>(in, count, block_size, out);
  else if (codec == Codec::kU4)
    decode_kernel<Codec::kU4><<<ctas, kThreads, 0, stream>>>(in, count, block_size, out);
  else
    decode_kernel<Codec::kE3M0><<<ctas, kThreads, 0, stream>>>(in, count, block_size, out);
  return cudaGetLastError();
}

}  // namespace longhaul::gpu
