// The C API's arguments as the C++ types: every enum crossing the ABI is checked, and a value
// that is none of its constants is LH_ERR_INVALID_ARGUMENT. Shared by the *_api.cpp files; it
// depends on no other file of src/capi.
#pragma once

#include "collective/allreduce_spec.hpp"
#include "collective/gather_spec.hpp"
#include "common/status.hpp"
#include "gpu/device_memory.hpp"
#include "longhaul/longhaul.h"

namespace longhaul::capi {

// collective::AllReduceSpec's defaults as lh_allreduce_options (memory: LH_MEMORY_AUTO).
lh_allreduce_options allreduce_defaults();

// An all-reduce's arguments as the collective engine's spec, validated and converted. Buffers are
// taken as they are (no staging).
Result<collective::AllReduceSpec> allreduce_spec(const void* send, void* recv, size_t count,
                                                 lh_dtype dtype, lh_reduce_op op,
                                                 const lh_allreduce_options* options);
// The wire options of a gathering collective (lh_allreduce_options, less the residual), validated
// and converted; no buffers or counts yet.
Result<collective::GatherSpec> gather_spec(lh_dtype dtype, const lh_allreduce_options* options);

// LH_ERR_INVALID_ARGUMENT for a value that is no lh_memory.
Status check_memory_kind(lh_memory memory);
// An lh_memory (already validated) as the GPU layer's.
gpu::Memory memory_kind(lh_memory memory);
// options->memory as the GPU layer's (kAuto for NULL options).
gpu::Memory memory_of(const lh_allreduce_options* options);

}  // namespace longhaul::capi
