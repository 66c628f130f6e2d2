#include "gpu/param_copies.hpp"

#include "gpu/device_memory.hpp"

namespace longhaul::gpu {
namespace {

class CudaParamCopies final : public sync::DeviceCopies {
 public:
  Result<std::shared_ptr<std::byte>> host_buffer(std::size_t bytes) override {
    auto pinned = PinnedBuffer::allocate(bytes);
    if (!pinned) return pinned.status();
    auto owner = std::make_shared<PinnedBuffer>(std::move(*pinned));
    std::byte* data = owner->data();
    return std::shared_ptr<std::byte>(std::move(owner), data);
  }
  Status to_host(void* host, const void* device, std::size_t bytes) override {
    return copy_to_host(host, device, bytes);
  }
  Status to_device(void* device, const void* host, std::size_t bytes) override {
    return copy_to_device(device, host, bytes);
  }
};

}  // namespace

std::shared_ptr<sync::DeviceCopies> device_param_copies() {
  return std::make_shared<CudaParamCopies>();
}

}  // namespace longhaul::gpu
