#include "gpu/staged_allreduce.hpp"

#include <cstring>
#include <memory>

#include "gpu/pinned_pool.hpp"
#include "quant/dtype.hpp"

namespace longhaul::gpu {

namespace {

Status copy_in(void* slot, const void* from, std::size_t bytes, Memory where) {
  if (where == Memory::kCuda) return copy_to_host(slot, from, bytes);
  std::memcpy(slot, from, bytes);
  return Status::ok();
}

Status copy_out(void* to, const void* slot, std::size_t bytes, Memory where) {
  if (where == Memory::kCuda) return copy_to_device(to, slot, bytes);
  std::memcpy(to, slot, bytes);
  return Status::ok();
}

}  // namespace

Result<bool> stage_device_buffers(collective::AllReduceSpec& spec, Memory declared) {
  const Memory input = memory_of(spec.input, declared);
  // In place (the usual case) asks the runtime once: this runs on every all-reduce.
  const Memory output = spec.output == spec.input ? input : memory_of(spec.output, declared);
  const bool scatter_to_device =
      spec.reduce_scatter() && memory_of(spec.scatter_output, declared) == Memory::kCuda;
  if (input != Memory::kCuda && output != Memory::kCuda && !scatter_to_device) return false;
  LH_RETURN_IF_ERROR(cuda_available());
  if (spec.reduce_scatter())
    return Status(LH_ERR_UNSUPPORTED, "a reduce-scatter of device memory is not staged yet");
  if (spec.residual != nullptr && memory_of(spec.residual, declared) == Memory::kCuda)
    return Status(LH_ERR_UNSUPPORTED, "the error-feedback residual must be host memory");

  const std::size_t bytes = spec.count * quant::element_size(spec.dtype);
  auto slot = acquire_pinned(bytes);
  if (!slot) return slot.status();
  LH_RETURN_IF_ERROR(copy_in((*slot)->data(), spec.input, bytes, input));

  void* const destination = spec.output;
  spec.input = (*slot)->data();
  spec.output = (*slot)->data();
  spec.restore_input = false;  // the caller's input is written only by land_output
  spec.land_output = [slot = *slot, destination, bytes, output] {
    return copy_out(destination, slot->data(), bytes, output);
  };
  return true;
}

}  // namespace longhaul::gpu
