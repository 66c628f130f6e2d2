#include "worker_buffer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(LONGHAUL_BENCH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

[[noreturn]] void die(const char* what, const char* message) {
  std::fprintf(stderr, "longhaul-allreduce-worker: %s: %s\n", what, message);
  std::exit(1);
}

std::size_t element_size(lh_dtype t) {
  return t == LH_DTYPE_BF16 ? 2 : 4;
}

// bf16 by rounding to nearest even (finite inputs; the worker's values are).
std::uint16_t to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

#if defined(LONGHAUL_BENCH_CUDA)
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(what, cudaGetErrorString(e));
}
#endif

}  // namespace

WorkerBuffer::WorkerBuffer(const std::vector<float>& values, lh_dtype dtype,
                           const std::string& device)
    : count_(values.size()), dtype_(dtype), on_device_(device == "cuda") {
  host_ = host_bytes(values);
  if (!on_device_) {
    data_ = host_.data();
    return;
  }
#if defined(LONGHAUL_BENCH_CUDA)
  check(cudaMalloc(&data_, host_.size()), "cudaMalloc");
  check(cudaMemcpy(data_, host_.data(), host_.size(), cudaMemcpyHostToDevice), "upload");
  host_.clear();
  host_.shrink_to_fit();
#else
  die("--device cuda", "this build has no GPU layer (LONGHAUL_CUDA=OFF or no nvcc)");
#endif
}

WorkerBuffer::~WorkerBuffer() {
#if defined(LONGHAUL_BENCH_CUDA)
  if (on_device_) cudaFree(data_);
#endif
}

std::vector<std::byte> WorkerBuffer::host_bytes(const std::vector<float>& values) const {
  std::vector<std::byte> bytes(values.size() * element_size(dtype_));
  if (dtype_ == LH_DTYPE_F32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint16_t h = to_bf16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

std::vector<float> WorkerBuffer::values() const {
  std::vector<std::byte> bytes = host_;
#if defined(LONGHAUL_BENCH_CUDA)
  if (on_device_) {
    bytes.resize(count_ * element_size(dtype_));
    check(cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost), "download");
  }
#endif
  std::vector<float> out(count_);
  for (std::size_t i = 0; i < count_; ++i) {
    if (dtype_ == LH_DTYPE_F32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = from_bf16(h);
    }
  }
  return out;
}

double WorkerBuffer::pcie_round_trip_s([[maybe_unused]] int repeats) const {
  if (!on_device_) return 0;
#if defined(LONGHAUL_BENCH_CUDA)
  const std::size_t bytes = count_ * element_size(dtype_);
  void* pinned = nullptr;
  check(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaMemcpy(pinned, data_, bytes, cudaMemcpyDeviceToHost), "copy to host");
    check(cudaMemcpy(data_, pinned, bytes, cudaMemcpyHostToDevice), "copy to device");
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  cudaFreeHost(pinned);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
#else
  return 0;
#endif
}
