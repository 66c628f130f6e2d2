// device_memory.hpp in a build without the GPU layer (LONGHAUL_CUDA=OFF): every pointer is host
// memory, and whatever needs a device says so.
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

namespace {
Status not_built() {
  return Status(LH_ERR_UNSUPPORTED,
                "no CUDA device: this longhaul was built without CUDA (LONGHAUL_CUDA=OFF)");
}
}  // namespace

Status cuda_available() {
  return not_built();
}
bool is_device_pointer(const void*) {
  return false;
}
Memory memory_of(const void*, Memory declared) {
  return declared == Memory::kAuto ? Memory::kHost : declared;
}

PinnedBuffer::~PinnedBuffer() = default;
PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept = default;
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept = default;
Result<PinnedBuffer> PinnedBuffer::allocate(std::size_t) {
  return not_built();
}
Status copy_to_host(void*, const void*, std::size_t) {
  return not_built();
}
Status copy_to_device(void*, const void*, std::size_t) {
  return not_built();
}

}  // namespace longhaul::gpu
