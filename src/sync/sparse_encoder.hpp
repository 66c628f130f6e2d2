// This member's side of the sparse codec in the engine (docs/training.md, "Sparse
// pseudo-gradients"): the error-feedback residual of every fragment (its own, not shared state:
// part of the engine's checkpoint), the buffer its encoding travels from, and the residual as it
// was before the last encoding, so that a round that does not take this member's contribution
// (dropped, retried, or its encoding refused) leaves the residual as if it had never been encoded.
//
// A round's residual follows its outcome: commit() once the group applied the round with this
// member's contribution counted (what was sent is in θ_g, what was not stays for the next round);
// roll_back() otherwise (the pseudo-gradient was not delivered: the trainer's parameters still hold
// it, since only an applied round resets them, so the next round's pseudo-gradient carries it).
//
// Not thread-safe: the engine's calls own it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "collective/sparse_allgather.hpp"
#include "common/status.hpp"
#include "quant/sparse_codec.hpp"
#include "sync/layout.hpp"

namespace longhaul::sync {

class SparseEncoder {
 public:
  SparseEncoder() = default;
  // Residuals of zeros for every fragment of `layout`, and buffers for its largest.
  static Result<SparseEncoder> make(const Layout& layout, const quant::sparse::Params& params);

  // Encodes fragment f's pseudo-gradient with error feedback and returns the encoding (valid until
  // the next encode). Keeps the residual from before for roll_back(). Errors: the codec refused
  // the totals (a non-finite value, an overflow; nothing changed): the contribution is non-finite.
  Result<std::span<std::byte>> encode(uint32_t f, std::span<const float> delta);
  // The last encoding's residual stays (commit) or is put back as it was before it (roll_back).
  // Both are no-ops when nothing is pending.
  void commit() { pending_ = false; }
  void roll_back();
  bool pending() const { return pending_; }

  // Every fragment's residual, back to back in fragment order (for checkpoints).
  std::vector<float>& residual() { return residual_; }
  const std::vector<float>& residual() const { return residual_; }
  std::span<float> residual(uint32_t f) { return {residual_.data() + offsets_[f], sizes_[f]}; }

  // The check every member runs on every contribution of fragment f's round: an empty one (a
  // member with nothing to send) or a well-formed encoding of the fragment with these parameters.
  collective::ContributionCheck check(uint32_t f) const;
  // The most bytes fragment f's round may gather from `members` members.
  uint64_t max_round_bytes(uint32_t f, size_t members) const;
  // Bytes of its buffers.
  size_t bytes() const;

 private:
  quant::sparse::Params params_;
  std::vector<size_t> offsets_, sizes_;  // by fragment
  std::vector<size_t> max_encoded_;      // by fragment
  std::vector<float> residual_;
  std::vector<float> saved_;  // fragment saved_fragment_'s residual before the last encode
  uint32_t saved_fragment_ = 0;
  bool pending_ = false;
  std::vector<std::byte> encoding_;
};

}  // namespace longhaul::sync
