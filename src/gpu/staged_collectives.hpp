// Collectives over CUDA device memory. Each runs on pinned host slots (pinned_pool.hpp): the
// device input crosses PCIe once into a slot, the result once back, and in between the operation
// is a host collective, so the bytes on the wire, and the results, are those a CPU peer produces
// (GPU and CPU peers in one ring agree bit for bit). The caller's device buffers are written
// only once the operation has succeeded (the spec's land_output), so a failed operation leaves
// them untouched.
//
// Each call returns false, and leaves the spec as it was, when no buffer is device memory; it
// blocks for the copy to the host (about 20 ms per GiB on PCIe 5). Errors: LH_ERR_UNSUPPORTED for
// device memory where there is no usable CUDA device, and for a residual in device memory; the
// runtime's error when a copy or a slot's allocation fails.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "collective/allreduce_spec.hpp"
#include "collective/gather_spec.hpp"
#include "common/status.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

// LH_ERR_UNSUPPORTED when `residual` (error feedback) is device memory: the reduction reads and
// writes it on the host, whatever the buffers are.
Status residual_on_host(const float* residual, Memory declared);

// An all-reduce or a reduce-scatter whose input, output or scatter_output is device memory
// (detected, or `declared` kCuda for all of them). `scatter_count`: the elements of this member's
// part of a reduce-scatter (unused for an all-reduce). The operation runs in place on the slot (no
// restore copy: the caller's input is never written).
Result<bool> stage_device_buffers(collective::AllReduceSpec& spec, Memory declared,
                                  std::size_t scatter_count = 0);

// An all-gather or a broadcast (GatherSpec) whose input or output is device memory, this member at
// ring position `rank`. The operation runs on an output slot; this member's contribution is
// copied into its place there segment by segment as the schedule starts (the staging pipeline;
// quantized, encoded on the device), and the output goes back to the device as its segments land,
// or after success where the caller keeps `restore_output`. No backup of the caller's output is
// kept: it is written only by the staging.
Result<bool> stage_device_buffers(collective::GatherSpec& spec, Memory declared, std::size_t rank);

// One all-reduce of a batch (lh_allreduce_batch): `count` elements from `input` into `output`.
struct BatchBuffers {
  const void* input = nullptr;
  void* output = nullptr;
  std::size_t count = 0;
};
// Stages every item whose input or output is device memory: the item then points, in place, at a
// pinned slot holding a copy of its input. Returns the landings of the staged items' results, to
// run in order once the whole batch has succeeded on every member (the batch itself restores the
// slots between attempts, as it restores host buffers). Before they run, the caller's device
// buffers are untouched; a landing that fails leaves that output unspecified.
Result<std::vector<std::function<Status()>>> stage_device_buffers(std::span<BatchBuffers> items,
                                                                  quant::DType dtype,
                                                                  Memory declared);

}  // namespace longhaul::gpu
