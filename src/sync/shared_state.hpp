// What every peer of the group keeps bit-identical, as shared state (state/registry.hpp): per
// fragment the global parameters θ_g and the outer momentum (fp32), the counters (the inner step
// the group has reached, the rounds applied to each fragment), and the engine's configuration.
// A joiner downloads all of it through the state sync; every sync verifies it by hash.
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
  // `config` describes the engine's configuration (letters, digits, '.', '=' and ',').
  SharedState(const Layout& layout, const std::string& config);
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;

  std::span<float> theta_g(size_t f) { return theta_g_[f]; }
  std::span<float> momentum(size_t f) { return momentum_[f]; }
  // Inner steps the group has finished.
  uint64_t& step() { return counters_[0]; }
  uint64_t step() const { return counters_[0]; }
  // Outer rounds applied to fragment f (0: its momentum buffer is not started).
  uint64_t& rounds(size_t f) { return counters_[1 + f]; }

  state::Registry& registry() { return registry_; }
  // Bytes of its buffers (θ_g, momentum, counters).
  size_t bytes() const;

 private:
  std::vector<std::vector<float>> theta_g_, momentum_;
  std::vector<uint64_t> counters_;
  uint8_t config_tag_ = 1;
  state::Registry registry_;
};

}  // namespace longhaul::sync
