// Device memory for the GPU tests: a cudaMalloc'd buffer freed on scope exit, and the reason to
// skip when this machine has no usable CUDA device.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "gpu/device_memory.hpp"

namespace longhaul::gpu::testing {

// Skips the calling test (GTEST_SKIP needs a void function) when no device can be used.
#define LH_SKIP_WITHOUT_CUDA()                                            \
  do {                                                                    \
    if (::longhaul::Status why = ::longhaul::gpu::cuda_available(); !why) \
      GTEST_SKIP() << "no CUDA device here: " << why.message();           \
  } while (0)

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&data_, bytes == 0 ? 1 : bytes) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

  template <typename T>
  void upload(const std::vector<T>& host) const {
    ASSERT_EQ(host.size() * sizeof(T), bytes_);
    ASSERT_EQ(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

}  // namespace longhaul::gpu::testing
