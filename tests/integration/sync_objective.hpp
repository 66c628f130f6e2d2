// The small objective the sync-engine tests train: peer i fits its own linear regression
// (targets from its own hidden weights), by plain SGD on a deterministic mini-batch per step.
// Shared by the peer processes (sync_peer) and the single-process simulation the test compares
// them with, so both run exactly the same float arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace longhaul::testing {

class RegressionTask {
 public:
  // `dim` weights; peer `index` has its own hidden weights and samples.
  RegressionTask(size_t dim, uint32_t index);
  // One SGD step on step `step`'s mini-batch: w ← w − lr·∇ (mean squared error).
  void step(std::span<float> w, uint64_t step, float lr) const;
  // The initial weights every peer starts from.
  static std::vector<float> initial(size_t dim);

 private:
  size_t dim_;
  uint32_t index_;
  std::vector<float> hidden_;
};

}  // namespace longhaul::testing
