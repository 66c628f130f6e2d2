// Shared-state block hashes of device memory, computed on the GPU: the XXH3-64 of every
// state::kBlockBytes block (state/block_hash.hpp), with the arithmetic of state/xxh3_lanes.hpp,
// which CPU CI holds to libxxhash. So a device tensor's block hashes are known without moving its
// bytes across PCIe; only the hashes (8 bytes per MiB) come back.
//
// Runs on the compute stream of the device that owns `device` and returns once the hashes are in
// `out`. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.hpp"

namespace longhaul::gpu {

// `out` must hold state::block_count(bytes) hashes. Errors: LH_ERR_INVALID_ARGUMENT for a wrong
// `out` size or memory that is not the device's; LH_ERR_UNSUPPORTED without a CUDA device; the
// runtime's error when the kernel or the copy fails.
Status hash_blocks_on_device(const void* device, std::size_t bytes, std::span<std::uint64_t> out);

}  // namespace longhaul::gpu
