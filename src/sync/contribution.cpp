#include "sync/contribution.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "runtime/worker_pool.hpp"

namespace longhaul::sync {
namespace {

constexpr size_t kChunk = 1 << 16;
// Added to a member's code when it saw a change pending (the codes are 0..3).
constexpr int kChangePending = 4;

template <class Body>
void for_chunks(size_t n, runtime::WorkerPool& workers, Body body) {
  workers.parallel_for((n + kChunk - 1) / kChunk, [&](size_t c) {
    const size_t begin = c * kChunk;
    body(begin, std::min(n, begin + kChunk));
  });
}

}  // namespace

bool form_delta(std::span<const float> theta_g, std::span<float> delta,
                runtime::WorkerPool& workers) {
  std::atomic<bool> finite{true};
  for_chunks(delta.size(), workers, [&](size_t begin, size_t end) {
    bool ok = true;
    for (size_t i = begin; i < end; ++i) {
      delta[i] = theta_g[i] - delta[i];
      ok &= std::isfinite(delta[i]);
    }
    if (!ok) finite.store(false, std::memory_order_relaxed);
  });
  if (finite.load()) return true;
  std::fill(delta.begin(), delta.end(), 0.0f);
  return false;
}

std::vector<float> contribution_mask(size_t members, size_t rank, Contribution c,
                                     uint32_t round_identity, bool change_pending) {
  std::vector<float> mask(2 * members, 0.0f);
  mask[rank] = static_cast<float>(static_cast<int>(c) + (change_pending ? kChangePending : 0));
  mask[members + rank] = static_cast<float>(round_identity & kRoundIdentityMask);
  return mask;
}

Tally tally(std::span<const float> summed_masks, uint32_t round_identity) {
  Tally t;
  const size_t members = summed_masks.size() / 2;
  const float identity = static_cast<float>(round_identity & kRoundIdentityMask);
  for (size_t r = 0; r < members; ++r)
    if (summed_masks[members + r] != identity) t.misaligned = true;
  for (size_t r = 0; r < members; ++r) {
    const int code = static_cast<int>(summed_masks[r]);
    if (code >= kChangePending) t.change_pending = true;
    switch (code % kChangePending) {
      case static_cast<int>(Contribution::kCounted):
        ++t.counted;
        break;
      case static_cast<int>(Contribution::kNonFinite):
        t.non_finite.push_back(r);
        break;
      case static_cast<int>(Contribution::kMalformed):
        t.malformed.push_back(r);
        break;
      default:
        t.none.push_back(r);
        break;
    }
  }
  return t;
}

Contribution code_of(std::span<const float> summed_masks, size_t rank) {
  return static_cast<Contribution>(static_cast<int>(summed_masks[rank]) % kChangePending);
}

void mark_malformed(std::span<float> summed_masks, size_t rank) {
  const int code = static_cast<int>(summed_masks[rank]);
  const int pending = code - code % kChangePending;
  summed_masks[rank] = static_cast<float>(pending + static_cast<int>(Contribution::kMalformed));
}

void average(std::span<float> delta, size_t counted, runtime::WorkerPool& workers) {
  if (counted <= 1) return;
  const float n = static_cast<float>(counted);
  for_chunks(delta.size(), workers, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) delta[i] /= n;
  });
}

}  // namespace longhaul::sync
