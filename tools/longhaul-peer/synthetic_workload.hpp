// The synthetic workload of longhaul-peer: state tensors shaped like a model's weights and a
// deterministic pseudo-update per step, standing in for a DiLoCo outer step (the pseudo-gradient
// every peer contributes, averaged by an all-reduce and added to the shared weights).
//
// Determinism: the initial state depends on the seed only, and a peer's contribution to step s
// on (seed, s, tensor, element, peer id) only. The all-reduce gives every peer of the step the same
// averaged bytes, and apply() is the same float arithmetic everywhere, so peers that apply the
// same steps hold bit-identical tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "longhaul/longhaul.h"

namespace longhaul_peer {

class SyntheticWorkload {
 public:
  // One f32 tensor per entry of `sizes`; each tensor's update is all-reduced as `inflight`
  // operations of (nearly) equal size. With `gather_bytes` > 0 every step also all-gathers that
  // many bytes per peer (a record of the step and the peer) into a digest in the state.
  SyntheticWorkload(const std::vector<size_t>& sizes, uint32_t inflight, uint64_t seed,
                    size_t gather_bytes = 0);

  // Registers every tensor (and the count of applied updates) in `state`.
  lh_status register_state(lh_state* state);

  // One all-reduce of a step: `count` floats from `send` averaged into `recv`.
  struct Slice {
    const float* send;
    float* recv;
    size_t count;
  };
  // Fills the send buffers with peer `peer_id`'s contribution to step `step`.
  void make_update(uint64_t step, uint64_t peer_id);
  const std::vector<Slice>& slices() const { return slices_; }
  // Adds the averaged update (the receive buffers) to the state tensors.
  void apply();
  // The updates applied so far: a state tensor, so after a sync the group's count.
  uint64_t applied() const { return applied_; }

  // The all-gather of a step (gather_bytes >= 16, or 0: none): this peer's record of `step`
  // (its id, the step, bytes that follow from both) goes to `record()`;
  // the group's, in ring order, land in gathered(), sized for `members` by gathered_for().
  size_t gather_bytes() const { return gather_bytes_; }
  const std::vector<uint8_t>& record(uint64_t step, uint64_t peer_id);
  std::vector<uint8_t>& gathered_for(size_t members);
  // Whether slot r of gathered() is a record of ring[r] (at the step it names); then folds the
  // gathered bytes into the state's digest (same bytes on every peer: the same digest).
  bool check_and_fold(const std::vector<uint64_t>& ring);

  size_t total_elements() const;

 private:
  uint64_t seed_;
  std::vector<std::vector<float>> weights_;   // the state tensors
  uint64_t applied_ = 0;                      // a state tensor too: updates applied so far
  std::vector<std::vector<float>> update_;    // this peer's contribution, per tensor
  std::vector<std::vector<float>> averaged_;  // the all-reduce results, per tensor
  std::vector<Slice> slices_;
  size_t gather_bytes_ = 0;
  uint64_t gather_digest_ = 0;  // a state tensor: every step's gathered bytes, hashed in order
  std::vector<uint8_t> record_, gathered_;
};

}  // namespace longhaul_peer
