// What every peer of the group keeps bit-identical, as shared state (state/registry.hpp): per
// fragment the global parameters θ_g and the outer momentum (fp32), the counters (the inner step
// the group has reached, the rounds applied to each fragment), the overlap the group agreed when τ
// is adaptive (overlap.hpp), and the engine's configuration. A joiner downloads all of it through
// the state sync; every sync verifies it by hash.
//
// The configuration travels in a tensor's name: a peer configured differently (H, F, τ, method,
// hyperparameters, codec, fragment sizes) holds a tensor the group's state does not have, and the
// state sync refuses it with LH_ERR_STATE_MISMATCH naming that tensor, instead of silently
// adopting the group's numbers.
//
// Not thread-safe: the engine's calls own it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "state/registry.hpp"
#include "sync/layout.hpp"

namespace longhaul::sync {

class SharedState {
 public:
  // `config` describes the engine's configuration (letters, digits, '.', '=' and ','); `delay`
  // is the first cycle's τ. The overlap is shared state only when τ is `adaptive`: a fixed τ's
  // state is what it was before τ could change (the same tensors, hash and bytes), and its
  // overlap values are this peer's own (steps_needed: for the stats only).
  SharedState(const Layout& layout, const std::string& config, uint32_t delay, bool adaptive);
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;

  std::span<float> theta_g(size_t f) { return theta_g_[f]; }
  std::span<float> momentum(size_t f) { return momentum_[f]; }
  // Inner steps the group has finished.
  uint64_t& step() { return counters_[0]; }
  uint64_t step() const { return counters_[0]; }
  // Outer rounds applied to fragment f (0: its momentum buffer is not started).
  uint64_t& rounds(size_t f) { return counters_[1 + f]; }
  // The overlap (overlap.hpp), agreed by the group: τ of the current cycle of H steps, τ of the
  // cycle before (a round's pseudo-gradient covers H minus that many steps), and the most steps
  // any member reported needing in the rounds applied this cycle (0: none reported).
  uint64_t& delay() { return overlap_[0]; }
  uint64_t delay() const { return overlap_[0]; }
  uint64_t& previous_delay() { return overlap_[1]; }
  uint64_t previous_delay() const { return overlap_[1]; }
  uint64_t& steps_needed() { return overlap_[2]; }
  uint64_t steps_needed() const { return overlap_[2]; }

  state::Registry& registry() { return registry_; }
  // Bytes of its buffers (θ_g, momentum, counters).
  size_t bytes() const;

 private:
  std::vector<std::vector<float>> theta_g_, momentum_;
  std::vector<uint64_t> counters_;
  uint64_t overlap_[3] = {0, 0, 0};
  bool adaptive_ = false;
  uint8_t config_tag_ = 1;
  state::Registry registry_;
};

}  // namespace longhaul::sync
