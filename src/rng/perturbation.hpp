// The SPSA perturbation z over a flat f32 buffer (issue 52): generated from a StreamId
// (stream.hpp) identically on every peer, platform and ISA path, any slice without the rest.
//
// Distribution: Rademacher, z_i = +1 or -1 with probability 1/2 each, one Philox bit per element
// (the classic SPSA choice; E[z z^T] = I as for MeZO's Gaussian). Every operation below is then a
// sign flip of c followed by at most one IEEE addition, so its bits are the same at every vector
// width, with no transcendental function whose last bit could differ between libms.
//
// Sign layout: element i of the buffer (counted from its start, whatever slice is computed) is
//   z_i = -1 when bit (i mod 32) of word ((i / 32) mod 4) of Philox block i / 128 is set, else +1;
// so the slice [first, first + n) is computed from blocks first / 128 ... alone, and equals the
// same elements of the whole buffer (philox_test.cpp checks it at random offsets).
//
// Exactness of perturb then unperturb: theta + c z - c z gives back theta exactly at element i
// whenever theta_i + c z_i is itself representable (the second addition then is exact too),
// except that -0 comes back as +0 (x - x is +0 in IEEE round to nearest). With c = +-2^k that
// holds when 2^k is a multiple of ulp(theta_i) and the sum does not carry into a binade whose ulp
// is coarser; it fails for |theta_i| below about 2^k (their low bits are lost) and at some carries
// (1 + 2^-23 + 1 rounds to 2). Measured (philox_test): eps = 2^-10 over N(0, 0.02) weights, 10.6%
// of the sums are inexact and 8% of the elements do not come back. So a peer must not rely on
// perturb(+eps), perturb(-eps) to restore theta bit for bit: perturbed_copy (a layer at a time)
// leaves theta untouched.
//
// All calls: LH_ERR_INVALID_ARGUMENT, and nothing written, when first + size > 2^39, a size
// differs, or a coefficient (or lr * g) is not finite; the error of an unusable
// LONGHAUL_FORCE_ISA otherwise (common/cpu_isa.hpp). They run in the default FP environment
// (quant/fp_env.hpp) whatever the caller's. Thread-safe; buffers must not overlap unless stated.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.hpp"
#include "rng/stream.hpp"

namespace longhaul::rng {

// The largest buffer a stream covers: 2^32 Philox blocks of 128 elements.
inline constexpr std::uint64_t kMaxPerturbationElements = std::uint64_t{1} << 39;

// z[j] = z_{first + j} (+1.0f or -1.0f).
Status fill_perturbation(const StreamId& id, std::uint64_t first, std::span<float> z);

// theta[j] += c * z_{first + j}, in place, fused (no temporary buffer): the forward passes at
// theta + eps z and theta - eps z.
Status perturb(const StreamId& id, std::uint64_t first, std::span<float> theta, float c);

// out[j] = theta[j] + c * z_{first + j}: theta untouched, so nothing has to be restored.
Status perturbed_copy(const StreamId& id, std::uint64_t first, std::span<const float> theta,
                      std::span<float> out, float c);

// The SPSA update theta[j] -= (lr * g) * z_{first + j}: the product lr * g is one f32
// multiplication, then each element one addition of its sign-flipped value; every peer applying
// the same (stream, lr, g) in the same order gets the same bits.
Status apply_update(const StreamId& id, std::uint64_t first, std::span<float> theta, float lr,
                    float projected_gradient);

// The raw Philox4x32-10 words of blocks first_block, first_block + 1, ... (counter word 0 wraps
// modulo 2^32), four per block: for tests and the benchmark. out.size() must be a multiple of 4.
Status philox_words(const PhiloxStream& stream, std::uint32_t first_block,
                    std::span<std::uint32_t> out);

}  // namespace longhaul::rng
