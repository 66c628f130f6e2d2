// The CUDA runtime as longhaul uses it: which pointers are device memory, pinned host memory,
// and copies between the two on the GPU layer's own streams.
//
// The library links the CUDA runtime statically and never libcuda: the runtime finds the driver
// at run time. So the same binary starts on a machine without a GPU (or built with
// LONGHAUL_CUDA=OFF), where every pointer counts as host memory and whatever needs a device fails
// with LH_ERR_UNSUPPORTED "no CUDA device: ..." (the runtime's own reason appended).
//
// Threads: every function is thread-safe. Copies run on one copy stream per device, separate from
// the compute stream the kernels use (codec_device.hpp), so a copy of one operation overlaps the
// kernels of another; each copy call returns once its bytes have arrived.
#pragma once

#include <cstddef>

#include "common/status.hpp"

namespace longhaul::gpu {

// Where a buffer handed to longhaul lives: detected from the pointer (kAuto), or declared.
enum class Memory { kAuto, kHost, kCuda };

// OK when a CUDA device can be used here; otherwise why not (LH_ERR_UNSUPPORTED: built without
// CUDA, no driver, no device). The first call initialises the runtime; the answer is kept.
Status cuda_available();

// Whether `p` points into memory a CUDA device owns (cudaMalloc, cudaMallocManaged). False for
// host memory (pinned or not), for null, and wherever cuda_available() fails. Cheap after the
// first call (one runtime query).
bool is_device_pointer(const void* p);

// Resolves kAuto for `p` (kHost/kCuda are returned as they are).
Memory memory_of(const void* p, Memory declared);

// Host memory the device can copy to and from at full speed (cudaHostAlloc). Owns its bytes;
// frees them on destruction. Movable, not copyable.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // `bytes` of pinned memory; the runtime's error when it cannot (no device, out of memory).
  static Result<PinnedBuffer> allocate(std::size_t bytes);

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Copies `bytes` from device memory to host memory (pinned or not; pinned is the fast path) on the
// copy stream of the device that owns `device`, and returns once they have arrived. The caller
// must have finished writing `device` (every stream that writes it synchronised, or ordered
// before the legacy default stream).
Status copy_to_host(void* host, const void* device, std::size_t bytes);

// Copies `bytes` from host memory to device memory, as copy_to_host.
Status copy_to_device(void* device, const void* host, std::size_t bytes);

}  // namespace longhaul::gpu
