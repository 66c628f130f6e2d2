// How the sync engine reaches parameters that live in device memory: it keeps a host mirror of a
// fragment's device pieces, copies them in before it reads the parameters and back out after it
// wrote them, and runs its CPU arithmetic on the mirror. gpu::device_param_copies() is the CUDA
// implementation (pinned mirror, the GPU layer's copy stream); a test can hand in host memory.
//
// Threads: the engine calls one function at a time.
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.hpp"

namespace longhaul::sync {

class DeviceCopies {
 public:
  virtual ~DeviceCopies() = default;
  // Host memory of `bytes` (at least one) that the copies below run at full speed from and to;
  // the result owns it. Fails where no device can be used (LH_ERR_UNSUPPORTED, "no CUDA device").
  virtual Result<std::shared_ptr<std::byte>> host_buffer(std::size_t bytes) = 0;
  // Each returns once the bytes have arrived; the device's error otherwise.
  virtual Status to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual Status to_device(void* device, const void* host, std::size_t bytes) = 0;
};

}  // namespace longhaul::sync
