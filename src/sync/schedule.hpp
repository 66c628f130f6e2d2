// When each fragment syncs (Streaming DiLoCo's schedule). Inner steps count from 1 (the step
// the trainer has just finished). Fragment f launches round k (k = 1, 2, ...) at step
// k·H + f·⌊H/F⌋: every fragment syncs every H steps, the F fragments spread evenly over those H
// steps, so at most one fragment's pseudo-gradient travels at a time. Its outer update is
// applied τ steps after the launch (τ = 0: at once, blocking, as DiLoCo); τ may change at an
// admission point (overlap.hpp), and every round launched in a cycle keeps its τ. The group admits
// joiners at every step that is a multiple of H, where no round is in flight (τ ≤ ⌊H/F⌋
// guarantees it): every member calls update_topology at the same steps, so a change of
// membership lands between rounds on every member alike.
//
// Within one call of the engine's step: first the rounds due to be applied, then admission,
// then the launches (so a fragment applied at step t may launch its next round at t too).
#pragma once

#include <cstdint>

#include "common/status.hpp"

namespace longhaul::sync {

class FragmentSchedule {
 public:
  // LH_ERR_INVALID_ARGUMENT for H = 0, F = 0, F > H, τ ≥ H (a round must be applied before the
  // fragment's next one launches), or, with F ≥ 2, τ > ⌊H/F⌋ (two rounds would travel at once).
  static Result<FragmentSchedule> make(uint32_t sync_every, uint32_t fragments, uint32_t delay);

  uint32_t sync_every() const { return h_; }
  uint32_t fragments() const { return f_; }
  // The τ it was made with: the first cycle's when the engine sizes τ itself (overlap.hpp).
  uint32_t delay() const { return tau_; }
  // The largest τ this H and F allow: H − 1 with one fragment, else min(⌊H/F⌋, H − 1).
  uint32_t delay_bound() const { return max_delay(h_, f_); }
  static uint32_t max_delay(uint32_t sync_every, uint32_t fragments);
  // The step of fragment f's launch in round k ≥ 1.
  uint64_t launch_step(uint32_t fragment, uint64_t round) const {
    return round * h_ + uint64_t{fragment} * (h_ / f_);
  }
  // Whether fragment f launches a round at `step`, and which (0: none).
  uint64_t round_launched(uint64_t step, uint32_t fragment) const;
  // Whether fragment f applies a round at `step` (launched τ steps before), and which (0: none).
  uint64_t round_applied(uint64_t step, uint32_t fragment) const {
    return round_applied(step, fragment, tau_);
  }
  // The same for a round launched with `delay`: τ may change between cycles of H steps.
  uint64_t round_applied(uint64_t step, uint32_t fragment, uint32_t delay) const {
    return step >= delay ? round_launched(step - delay, fragment) : 0;
  }
  bool admits(uint64_t step) const { return step > 0 && step % h_ == 0; }

 private:
  FragmentSchedule(uint32_t h, uint32_t f, uint32_t tau) : h_(h), f_(f), tau_(tau) {}
  uint32_t h_, f_, tau_;
};

}  // namespace longhaul::sync
