// CUDA runtime errors as longhaul statuses, and a scope that makes a device current.
// Included only by the GPU layer's CUDA sources.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include <fmt/format.h>

#include "common/status.hpp"

namespace longhaul::gpu {

// OK for cudaSuccess; otherwise the runtime's error (cleared, so it does not stick to the next
// call) as LH_ERR_INTERNAL, or LH_ERR_UNSUPPORTED when there is no usable device.
inline Status cuda_check(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return Status::ok();
  (void)cudaGetLastError();
  const bool no_device = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver;
  return Status(no_device ? LH_ERR_UNSUPPORTED : LH_ERR_INTERNAL,
                fmt::format("{}{}: {} ({})", no_device ? "no CUDA device: " : "", what,
                            cudaGetErrorString(e), cudaGetErrorName(e)));
}

// Makes `device` the calling thread's current device for the scope, and puts the caller's back.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    status_ = cuda_check(cudaGetDevice(&saved_), "cudaGetDevice");
    if (status_ && saved_ != device) {
      status_ = cuda_check(cudaSetDevice(device), "cudaSetDevice");
      changed_ = status_.is_ok();
    }
  }
  ~DeviceScope() {
    if (changed_) (void)cudaSetDevice(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  const Status& status() const { return status_; }

 private:
  int saved_ = 0;
  bool changed_ = false;
  Status status_;
};

// The GPU layer's streams per device: one for copies and one for kernels, both blocking (ordered
// after work the caller queued on the legacy default stream), and one that carries only the host
// functions reporting the copies' arrivals (non-blocking; it waits for the copies by events). A
// stream runs nothing behind a host function until the function returns, so reports queued on
// the copy stream itself would hold back the copies after them. Created at first use, never
// destroyed (the runtime tears them down at exit). Defined in device_memory_cuda.cpp.
enum class StreamRole { kCopy, kCompute, kNotify };
Result<cudaStream_t> stream_for(int device, StreamRole role);

// The device that owns `p`, or -1 for host memory (or when CUDA is unavailable).
int device_owning(const void* p);

}  // namespace longhaul::gpu
