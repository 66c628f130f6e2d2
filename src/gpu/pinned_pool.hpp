// A process-wide pool of pinned host slots: cudaHostAlloc costs about two milliseconds per 4 MiB
// (0.54 to 0.59 s for 1 GiB on the H200 machine, gpu-run16), far more than the copy itself, so a
// slot handed back is kept for the next operation of a similar size.
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

// A slot of at least `bytes` pinned bytes: a kept one of at most twice that size, or a new one.
// Destroying the shared pointer hands the slot back, on any thread, without a CUDA call.
// Thread-safe. The pool keeps at most kPinnedPoolBytes of idle slots; beyond that, slots handed
// back are freed by the next acquire.
Result<std::shared_ptr<PinnedBuffer>> acquire_pinned(std::size_t bytes);

inline constexpr std::size_t kPinnedPoolBytes = std::size_t{8} << 30;

}  // namespace longhaul::gpu
