// All-reduces of CUDA device memory. The collective runs on a pinned host slot (pinned_pool.hpp):
// the input crosses PCIe once into it, the result once back, and in between the operation is a
// host all-reduce, so the bytes on the wire, and the results, are those a CPU peer produces (GPU
// and CPU peers in one ring agree bit for bit).
#pragma once

#include "collective/allreduce_spec.hpp"
#include "common/status.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

// When `spec`'s input or output is device memory (detected, or `declared` kCuda for both):
// copies the input into a pinned slot, runs the operation in place on the slot (no restore copy:
// the caller's input is not written before success), and sets spec.land_output to copy the result
// to the caller's output once the operation has succeeded. On failure the caller's buffers are
// untouched. Returns false, and leaves `spec` as it was, for host memory. Blocks for the copy to
// the host (about 20 ms per GiB on PCIe 5).
//
// Errors: LH_ERR_UNSUPPORTED for device memory where there is no usable CUDA device, for a
// residual in device memory, and for a reduce-scatter of device memory (not staged yet); the
// runtime's error when a copy or the slot's allocation fails.
Result<bool> stage_device_buffers(collective::AllReduceSpec& spec, Memory declared);

}  // namespace longhaul::gpu
