// device_memory.hpp on the CUDA runtime (linked statically; it loads the driver at run time).
#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/mutex.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

namespace {

class Streams {
 public:
  Result<cudaStream_t> of(int device, StreamRole role) {
    MutexLock lock(mu_);
    const std::size_t index =
        kRoles * static_cast<std::size_t>(device) + static_cast<std::size_t>(role);
    if (streams_.size() <= index) streams_.resize(index + 1, nullptr);
    cudaStream_t& s = streams_[index];
    if (s == nullptr) {
      DeviceScope scope(device);
      LH_RETURN_IF_ERROR(scope.status());
      const unsigned flags =
          role == StreamRole::kNotify ? cudaStreamNonBlocking : cudaStreamDefault;
      LH_RETURN_IF_ERROR(
          cuda_check(cudaStreamCreateWithFlags(&s, flags), "cudaStreamCreateWithFlags"));
    }
    return s;
  }

 private:
  static constexpr std::size_t kRoles = 3;
  Mutex mu_;
  std::vector<cudaStream_t> streams_ GUARDED_BY(mu_);  // [kRoles * device + role]
};

// Copies on the owning device's copy stream, with that device current for the call only.
Status copy(void* to, const void* from, std::size_t bytes, int device, cudaMemcpyKind kind,
            const char* what) {
  if (bytes == 0) return Status::ok();
  if (device < 0) return invalid_argument(fmt::format("{}: the buffer is not device memory", what));
  DeviceScope scope(device);
  LH_RETURN_IF_ERROR(scope.status());
  auto stream = stream_for(device, StreamRole::kCopy);
  if (!stream) return stream.status();
  LH_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(to, from, bytes, kind, *stream), what));
  return cuda_check(cudaStreamSynchronize(*stream), what);
}

}  // namespace

Result<cudaStream_t> stream_for(int device, StreamRole role) {
  static auto* streams = new Streams;  // never destroyed: copies may run during exit
  return streams->of(device, role);
}

int device_owning(const void* p) {
  if (p == nullptr || !cuda_available()) return -1;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, so the next runtime call starts clean
    return -1;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

Status cuda_available() {
  static const Status available = [] {
    int devices = 0;
    if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
      (void)cudaGetLastError();
      return Status(LH_ERR_UNSUPPORTED, fmt::format("no CUDA device: {}", cudaGetErrorString(e)));
    }
    if (devices == 0) return Status(LH_ERR_UNSUPPORTED, "no CUDA device: the runtime sees none");
    return Status::ok();
  }();
  return available;
}

bool is_device_pointer(const void* p) {
  return device_owning(p) >= 0;
}

Memory memory_of(const void* p, Memory declared) {
  if (declared != Memory::kAuto) return declared;
  return is_device_pointer(p) ? Memory::kCuda : Memory::kHost;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Result<PinnedBuffer> PinnedBuffer::allocate(std::size_t bytes) {
  LH_RETURN_IF_ERROR(cuda_available());
  void* p = nullptr;
  LH_RETURN_IF_ERROR(cuda_check(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable),
                                fmt::format("cudaHostAlloc of {} bytes", bytes)));
  PinnedBuffer b;
  b.data_ = static_cast<std::byte*>(p);
  b.size_ = bytes;
  return b;
}

Status copy_to_host(void* host, const void* device, std::size_t bytes) {
  LH_RETURN_IF_ERROR(cuda_available());
  return copy(host, device, bytes, device_owning(device), cudaMemcpyDeviceToHost, "copy to host");
}

Status copy_to_device(void* device, const void* host, std::size_t bytes) {
  LH_RETURN_IF_ERROR(cuda_available());
  return copy(device, host, bytes, device_owning(device), cudaMemcpyHostToDevice, "copy to device");
}

}  // namespace longhaul::gpu
