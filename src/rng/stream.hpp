// The stream of one perturbation: which Philox key and counters generate z for (seed of the run,
// step, peer id, perturbation index), so that every peer derives every other peer's z.
//
// Layout. Philox4x32 has a 64-bit key and a 128-bit counter, too few bits to hold the four
// names directly (seed, step and peer id are 64 bits each), so they enter in two stages:
//   1. D = Philox4x32-10(counter = (step lo, step hi, peer lo, peer hi), key = (seed lo, seed hi))
//   2. z's block b is Philox4x32-10(counter = (b, perturbation, D[2], D[3]), key = (D[0], D[1]))
// Philox is a bijection of the counter under a fixed key, so two (step, peer) pairs of one run
// give different D, and with the perturbation index and the block in the counter no two inputs of
// stage 2 are ever equal: distinct streams are as independent as Philox's outputs, never a
// hash collision. Block b holds the signs of elements 128 b ... 128 b + 127 (perturbation.hpp),
// so b < 2^32 bounds a buffer at 2^39 elements.
#pragma once

#include <cstdint>

namespace longhaul::rng {

// The names of one perturbation, as every peer knows them: the run's seed (agreed at the
// start), the step, the contributing peer's id and the index of the perturbation within its step.
struct StreamId {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t peer = 0;
  std::uint32_t perturbation = 0;
};

// A derived stream: the Philox key and counter words 1-3 of its blocks; counter word 0 is the
// block index. Plain data, passed to every ISA's kernels.
struct PhiloxStream {
  std::uint32_t key[2] = {0, 0};
  std::uint32_t counter_high[3] = {0, 0, 0};  // counter words 1, 2, 3
};

// Stage 1 and 2 of the layout above.
PhiloxStream derive_stream(const StreamId& id);

}  // namespace longhaul::rng
