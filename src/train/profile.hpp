// Wall time per layer kind, forward and backward apart, so a benchmark can say where a training
// step's time goes. Off unless a Profile is attached; the cost when on is two clock reads per
// kernel call.
#pragma once

#include <array>
#include <chrono>
#include <string_view>

namespace longhaul::train {

enum class Phase {
  kEmbedding,
  kLayerNorm,  // with the residual adds fused in
  kQkvLinear,
  kAttention,
  kAttProjLinear,
  kFcLinear,
  kGelu,  // backward only: the forward is fused into the fc tiles
  kFcProjLinear,
  kHead,       // the tied output projection (logits = lnf @ wte^T)
  kLoss,       // fused softmax + cross-entropy
  kClip,       // global gradient-norm clipping
  kOptimizer,  // AdamW
  kCount,
};

std::string_view phase_name(Phase phase);

class Profile {
 public:
  void add(Phase phase, bool backward, double seconds) {
    seconds_[static_cast<int>(phase)][backward ? 1 : 0] += seconds;
  }
  double seconds(Phase phase, bool backward) const {
    return seconds_[static_cast<int>(phase)][backward ? 1 : 0];
  }
  double total() const;
  void reset() { seconds_ = {}; }

 private:
  std::array<std::array<double, 2>, static_cast<int>(Phase::kCount)> seconds_{};
};

// Adds the lifetime of the scope to `profile` (if not null).
class ScopedPhase {
 public:
  ScopedPhase(Profile* profile, Phase phase, bool backward)
      : profile_(profile), phase_(phase), backward_(backward) {
    if (profile_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedPhase() {
    if (profile_ == nullptr) return;
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
    profile_->add(phase_, backward_, d.count());
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  Profile* profile_;
  Phase phase_;
  bool backward_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace longhaul::train
