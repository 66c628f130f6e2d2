// Per-block zstd compression of state transfers, used only where it pays.
//
// The decision is made per block from a cheap estimate (compressing two 1 KiB samples at zstd's
// fastest level, a few microseconds per 1 MiB block) taken when the block is hashed: a block is
// sent compressed only when the samples shrink below half. Typical weights (dense floats) never
// qualify, so a fast link carries them raw at full speed; zero-filled or low-entropy tensors
// (fresh optimizer moments, masks, counters) shrink by far more than the compression costs.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "common/status.hpp"

namespace longhaul::state {

// True when the block is worth compressing for transfer.
bool estimate_compressible(std::span<const std::byte> block);
// zstd (fast level) of `block`.
std::vector<std::byte> compress_block(std::span<const std::byte> block);
// Decompresses into `out`, which must be exactly the block's original size; anything else
// (corrupt input, a different size) is LH_ERR_PROTOCOL.
Status decompress_block(std::span<const std::byte> compressed, std::span<std::byte> out);

}  // namespace longhaul::state
