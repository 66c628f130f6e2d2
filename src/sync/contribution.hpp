// What each member brings to a round, and the group's tally of it.
//
// A member forms its pseudo-gradient Δ = θ_g − θ_local for the fragment. It contributes only
// when Δ covers a whole round of its own training (a joiner's first, partial round would pull the
// mean towards θ_g) and every value of Δ is finite (one member's NaN must not become everyone's).
// Otherwise it sends zeros and is not counted. Beside Δ every member all-reduces a mask: two
// floats per ring position, its own holding its code and the identity of the round it sent (a sum
// of one-hot vectors), so every member learns who was counted and who was excluded, divides the
// sum by the same count, and sees whether every member was in the same round. A member's code also
// says whether it saw a membership change pending (a joiner waiting): a round the group applies
// tells every member the same thing, so they all re-form at the next admission point, or none do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace longhaul::runtime {
class WorkerPool;
}

namespace longhaul::sync {

// kMalformed is never sent: with the sparse codec every member writes it into the summed masks
// over a counted member whose encoding the sparse all-gather's check refused (every member refuses
// the same ones), so the tally, and a checkpoint of the round, leave it out like a non-finite one.
enum class Contribution : int { kNone = 0, kCounted = 1, kNonFinite = 2, kMalformed = 3 };

// A round's identity travels as an f32, exact below 2^24.
inline constexpr uint32_t kRoundIdentityMask = (1u << 24) - 1;

// Forms delta = theta_g − local in place (`delta` holds the local values on entry). Returns
// false, and leaves zeros in `delta`, when any value of it is not finite.
bool form_delta(std::span<const float> theta_g, std::span<float> delta,
                runtime::WorkerPool& workers);

// The mask this member sends (2·members floats): zeros but its own code (position `rank`, with
// the change it saw pending) and the round it sent (position members + rank).
std::vector<float> contribution_mask(size_t members, size_t rank, Contribution c,
                                     uint32_t round_identity, bool change_pending);

struct Tally {
  size_t counted = 0;
  std::vector<size_t> non_finite;  // ring positions excluded for a non-finite contribution
  std::vector<size_t> malformed;   // ring positions excluded for a refused encoding
  std::vector<size_t> none;        // positions that had nothing to contribute yet
  bool misaligned = false;         // some member sent another round than `round_identity`
  bool change_pending = false;     // some member saw a membership change pending
};
// Reads the summed masks.
Tally tally(std::span<const float> summed_masks, uint32_t round_identity);

// The code member `rank` sent, as the summed masks hold it (its pending flag left out).
Contribution code_of(std::span<const float> summed_masks, size_t rank);
// Rewrites member `rank`'s code in the summed masks as kMalformed, keeping its pending flag.
void mark_malformed(std::span<float> summed_masks, size_t rank);

// delta ← delta / counted: the mean over the members that were counted.
void average(std::span<float> delta, size_t counted, runtime::WorkerPool& workers);

}  // namespace longhaul::sync
