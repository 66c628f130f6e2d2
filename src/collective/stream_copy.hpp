// A copy whose destination is written around the caches (non-temporal stores).
//
// For the backup of an in-place all-reduce's input: written once per operation and read only if
// the operation fails, so ordinary stores would first read every destination line into the cache
// (a third memory pass) and evict the data the reduction is about to use.
#pragma once

#include <cstddef>

namespace longhaul::collective {

// memcpy(dst, src, bytes) for non-overlapping buffers; the stores are fenced before it returns.
void copy_streaming(void* dst, const void* src, size_t bytes);

}  // namespace longhaul::collective
