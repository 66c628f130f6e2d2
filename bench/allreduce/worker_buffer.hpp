// The all-reduce worker's buffer: host memory, or CUDA device memory (--device cuda, in a build
// with the GPU layer), holding f32 or bf16 elements made from the worker's f32 values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <longhaul/longhaul.h>

class WorkerBuffer {
 public:
  // `values` as `dtype` (LH_DTYPE_F32 or LH_DTYPE_BF16) on `device` ("cpu" or "cuda"). Exits the
  // process with a message when the device cannot be used.
  WorkerBuffer(const std::vector<float>& values, lh_dtype dtype, const std::string& device);
  ~WorkerBuffer();
  WorkerBuffer(const WorkerBuffer&) = delete;
  WorkerBuffer& operator=(const WorkerBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t count() const { return count_; }
  lh_dtype dtype() const { return dtype_; }
  // The values back as f32 (copied from the device for cuda).
  std::vector<float> values() const;
  // Median seconds of a copy of the whole buffer to pinned host memory and back (cudaMemcpy): what
  // the staging of one all-reduce costs on PCIe. 0 for host memory.
  double pcie_round_trip_s(int repeats) const;

 private:
  std::vector<std::byte> host_bytes(const std::vector<float>& values) const;

  void* data_ = nullptr;
  std::vector<std::byte> host_;  // the bytes when on the CPU
  std::size_t count_;
  lh_dtype dtype_;
  bool on_device_;
};
