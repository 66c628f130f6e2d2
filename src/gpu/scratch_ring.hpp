// Device scratch for the staging's encodings, reused in stream order (CUDA sources only).
//
// An encoding copied out (or in) needs device memory for the encoded bytes while they cross.
// Allocating per segment would hold the encodings of every segment an operation queued at once:
// about a quarter of the buffer. The ring keeps kScratchSlots slots per device instead, each as
// large as the largest encoding it has held, and a use of a slot is queued after the previous use
// of that slot has finished, by an event; nothing blocks a thread. So the scratch stays at
// kScratchSlots encoded segments (17 MiB for 1 MiB segments in u8), whatever the buffer.
//
// Threads: thread-safe. Uses are queued one at a time, in the order they take their slot.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <functional>

#include "common/mutex.hpp"
#include "common/status.hpp"

namespace longhaul::gpu {

inline constexpr std::size_t kScratchSlots = 64;

class ScratchRing {
 public:
  // The ring of `device`, created at first use and never destroyed (copies may run during exit).
  // LH_ERR_UNSUPPORTED where the device has no stream-ordered allocation (the slots grow with
  // cudaMallocAsync).
  static Result<ScratchRing*> of(int device);

  // Takes the next slot, of at least `bytes`, and calls `use` with it to queue its work on
  // `first` (which waits for the slot's previous use to finish before anything `use` queues) and
  // then on `last`, after whose queued work the slot is free again. Returns `use`'s failure, or
  // the runtime's. The caller's device must be current.
  Status with_slot(std::size_t bytes, cudaStream_t first, cudaStream_t last,
                   const std::function<Status(void* slot)>& use);

 private:
  struct Slot {
    void* data = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t free = nullptr;  // recorded after the slot's last use
    bool used = false;
  };
  ScratchRing() = default;
  Status create_events();
  // Makes `slot` at least `bytes` large, in stream order on `stream`.
  static Status grow(Slot& slot, std::size_t bytes, cudaStream_t stream);

  Mutex mu_;
  std::array<Slot, kScratchSlots> slots_ GUARDED_BY(mu_);
  std::size_t next_ GUARDED_BY(mu_) = 0;
};

}  // namespace longhaul::gpu
