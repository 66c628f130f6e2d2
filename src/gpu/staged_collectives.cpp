#include "gpu/staged_collectives.hpp"

#include <cstring>
#include <memory>

#include "gpu/copy_engine.hpp"
#include "gpu/pinned_pool.hpp"
#include "gpu/staging_pipeline.hpp"
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

// Where the result is landed once the operation succeeded: `bytes` of `slot` to `destination`.
std::function<Status()> landing(std::shared_ptr<PinnedBuffer> slot, void* destination,
                                std::size_t bytes, Memory where) {
  return [slot = std::move(slot), destination, bytes, where] {
    return copy_out(destination, slot->data(), bytes, where);
  };
}

// Stages through `buffers` by a pipeline whose copies overlap the network (or, where nothing is
// copied segment by segment, lands by `land_whole` alone) for an all-reduce or a gather spec.
template <typename Spec>
Status install_pipeline(Spec& spec, const PipelineBuffers& buffers,
                        std::function<Status()> land_whole) {
  if (buffers.source == nullptr && buffers.destination == nullptr) {
    spec.land_output = std::move(land_whole);  // nothing to overlap
    return Status::ok();
  }
  auto engine = cuda_copy_engine(buffers.source ? buffers.source : buffers.destination);
  if (!engine) return engine.status();
  auto pipeline = StagingPipeline::create(*std::move(engine), buffers, std::move(land_whole));
  spec.land_output = [pipeline] { return pipeline->land(); };
  spec.segment_staging = std::move(pipeline);
  return Status::ok();
}

}  // namespace

Status residual_on_host(const float* residual, Memory declared) {
  if (residual != nullptr && memory_of(residual, declared) == Memory::kCuda)
    return Status(LH_ERR_UNSUPPORTED, "the error-feedback residual must be host memory");
  return Status::ok();
}

Result<bool> stage_device_buffers(collective::AllReduceSpec& spec, Memory declared,
                                  std::size_t scatter_count) {
  LH_RETURN_IF_ERROR(residual_on_host(spec.residual, declared));
  const Memory input = memory_of(spec.input, declared);
  // In place (the usual case) asks the runtime once: this runs on every all-reduce.
  const bool in_place = spec.output == spec.input;
  const Memory output = in_place                ? input
                        : spec.reduce_scatter() ? memory_of(spec.scatter_output, declared)
                                                : memory_of(spec.output, declared);
  if (input != Memory::kCuda && output != Memory::kCuda) return false;
  LH_RETURN_IF_ERROR(cuda_available());

  const std::size_t element = quant::element_size(spec.dtype);
  auto slot = acquire_pinned(spec.count * element);
  if (!slot) return slot.status();
  PipelineBuffers buffers{.slot = (*slot)->data(),
                          .bytes = spec.count * element,
                          .element_size = element,
                          .slot_owner = *slot};
  if (input == Memory::kCuda) {
    buffers.source = spec.input;
    buffers.source_count = spec.count;
  } else {
    std::memcpy(buffers.slot, spec.input, buffers.bytes);
  }
  std::function<Status()> land_whole;
  if (spec.reduce_scatter()) {
    // Only this member's part is written: into a slot of its own. Its `output` stays unset (set,
    // it would make the operation in place, which a reduce-scatter is not).
    auto part = acquire_pinned(scatter_count * element);
    if (!part) return part.status();
    land_whole = landing(*part, spec.scatter_output, scatter_count * element, output);
    spec.scatter_output = (*part)->data();
  } else if (output == Memory::kCuda) {
    buffers.destination = spec.output;
    // Segments are written as they finish where the caller accepts unspecified output after a
    // failure; in place with the restore, only after success, so a failure leaves it as it was.
    buffers.destination_after_success = in_place && spec.restore_input;
  } else {
    land_whole = landing(*slot, spec.output, buffers.bytes, output);
  }
  spec.input = buffers.slot;
  if (!spec.reduce_scatter()) spec.output = buffers.slot;
  spec.restore_input = false;  // the caller's input is never written
  LH_RETURN_IF_ERROR(install_pipeline(spec, buffers, std::move(land_whole)));
  return true;
}

Result<std::vector<std::function<Status()>>> stage_device_buffers(std::span<BatchBuffers> items,
                                                                  quant::DType dtype,
                                                                  Memory declared) {
  std::vector<std::function<Status()>> landings;
  const std::size_t element = quant::element_size(dtype);
  for (BatchBuffers& item : items) {
    const Memory input = memory_of(item.input, declared);
    const Memory output = item.output == item.input ? input : memory_of(item.output, declared);
    if (input != Memory::kCuda && output != Memory::kCuda) continue;
    LH_RETURN_IF_ERROR(cuda_available());
    auto slot = acquire_pinned(item.count * element);
    if (!slot) return slot.status();
    LH_RETURN_IF_ERROR(copy_in((*slot)->data(), item.input, item.count * element, input));
    landings.push_back(landing(*slot, item.output, item.count * element, output));
    item.input = (*slot)->data();
    item.output = (*slot)->data();
  }
  return landings;
}

Result<bool> stage_device_buffers(collective::GatherSpec& spec, Memory declared, std::size_t rank) {
  const Memory input = spec.input ? memory_of(spec.input, declared) : Memory::kHost;
  const Memory output = memory_of(spec.output, declared);
  if (input != Memory::kCuda && output != Memory::kCuda) return false;
  LH_RETURN_IF_ERROR(cuda_available());

  const std::size_t element = quant::element_size(spec.dtype);
  std::size_t own_offset = 0;
  for (std::size_t r = 0; r < rank; ++r) own_offset += spec.counts[r];
  const std::size_t own_bytes = spec.counts[rank] * element;
  auto slot = acquire_pinned(spec.total() * element);
  if (!slot) return slot.status();
  PipelineBuffers buffers{.slot = (*slot)->data(),
                          .bytes = spec.total() * element,
                          .element_size = element,
                          .slot_owner = *slot};
  std::byte* own_place = buffers.slot + own_offset * element;
  // The contribution goes to its place in the output slot (the operation then runs in place).
  if (spec.input && input == Memory::kCuda) {
    buffers.source = spec.input;
    buffers.source_first = own_offset;
    buffers.source_count = spec.counts[rank];
  } else if (spec.input) {
    std::memcpy(own_place, spec.input, own_bytes);
  }
  std::function<Status()> land_whole;
  if (output == Memory::kCuda) {
    buffers.destination = spec.output;
    // Written as segments arrive where the caller waived the restore, else after success.
    buffers.destination_after_success = spec.restore_output;
  } else {
    land_whole = landing(*slot, spec.output, buffers.bytes, output);
  }
  spec.input = spec.input ? own_place : nullptr;
  spec.output = buffers.slot;
  spec.restore_output = false;  // the caller's output is written only by the staging
  LH_RETURN_IF_ERROR(install_pipeline(spec, buffers, std::move(land_whole)));
  return true;
}

}  // namespace longhaul::gpu
