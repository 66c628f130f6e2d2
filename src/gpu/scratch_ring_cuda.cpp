#include "gpu/scratch_ring.hpp"

#include <memory>
#include <vector>

#include "gpu/cuda_check.hpp"

namespace longhaul::gpu {

namespace {

class Rings {
 public:
  Result<ScratchRing*> of(int device, const std::function<Result<ScratchRing*>()>& create) {
    MutexLock lock(mu_);
    const auto index = static_cast<std::size_t>(device);
    if (rings_.size() <= index) rings_.resize(index + 1, nullptr);
    if (rings_[index] == nullptr) {
      auto ring = create();
      if (!ring) return ring.status();
      rings_[index] = *ring;
    }
    return rings_[index];
  }

 private:
  Mutex mu_;
  std::vector<ScratchRing*> rings_ GUARDED_BY(mu_);  // by device; never freed
};

}  // namespace

Result<ScratchRing*> ScratchRing::of(int device) {
  static auto* rings = new Rings;
  return rings->of(device, [device]() -> Result<ScratchRing*> {
    int pools = 0;
    LH_RETURN_IF_ERROR(
        cuda_check(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device),
                   "cudaDeviceGetAttribute"));
    if (pools == 0)
      return Status(LH_ERR_UNSUPPORTED, "the device has no stream-ordered allocation");
    DeviceScope scope(device);
    LH_RETURN_IF_ERROR(scope.status());
    std::unique_ptr<ScratchRing> ring(new ScratchRing);
    LH_RETURN_IF_ERROR(ring->create_events());
    return ring.release();
  });
}

Status ScratchRing::create_events() {
  MutexLock lock(mu_);
  for (Slot& s : slots_)
    LH_RETURN_IF_ERROR(
        cuda_check(cudaEventCreateWithFlags(&s.free, cudaEventDisableTiming), "cudaEventCreate"));
  return Status::ok();
}

Status ScratchRing::grow(Slot& slot, std::size_t bytes, cudaStream_t stream) {
  if (slot.bytes >= bytes) return Status::ok();
  if (slot.data != nullptr)
    LH_RETURN_IF_ERROR(cuda_check(cudaFreeAsync(slot.data, stream), "cudaFreeAsync (scratch)"));
  slot.data = nullptr;
  slot.bytes = 0;
  LH_RETURN_IF_ERROR(
      cuda_check(cudaMallocAsync(&slot.data, bytes, stream), "cudaMallocAsync (scratch)"));
  slot.bytes = bytes;
  return Status::ok();
}

Status ScratchRing::with_slot(std::size_t bytes, cudaStream_t first, cudaStream_t last,
                              const std::function<Status(void* slot)>& use) {
  // Held while the use is queued: the next use of this slot must find its `free` recorded.
  MutexLock lock(mu_);
  Slot& slot = slots_[next_++ % kScratchSlots];
  if (slot.used)
    LH_RETURN_IF_ERROR(cuda_check(cudaStreamWaitEvent(first, slot.free, 0), "cudaStreamWaitEvent"));
  LH_RETURN_IF_ERROR(grow(slot, bytes, first));
  const Status used = use(slot.data);
  // After a failure too: whatever `use` queued on `last` finishes before the next use starts.
  // (The engine synchronises both streams after a failure, so nothing on `first` is left.)
  const Status recorded = cuda_check(cudaEventRecord(slot.free, last), "cudaEventRecord");
  slot.used = recorded.is_ok();
  return used ? recorded : used;
}

}  // namespace longhaul::gpu
