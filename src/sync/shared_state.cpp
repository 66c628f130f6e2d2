#include "sync/shared_state.hpp"

#include <iterator>

#include <fmt/format.h>

namespace longhaul::sync {

SharedState::SharedState(const Layout& layout, const std::string& config, uint32_t delay,
                         bool adaptive)
    : counters_(1 + layout.fragments(), 0), overlap_{delay, delay, 0}, adaptive_(adaptive) {
  // Registration only fails for a duplicate or bad name, which these never are.
  for (size_t f = 0; f < layout.fragments(); ++f) {
    theta_g_.emplace_back(layout.fragment_size(f), 0.0f);
    momentum_.emplace_back(layout.fragment_size(f), 0.0f);
    (void)registry_.add_tensor(fmt::format("sync.theta_g.{}", f), theta_g_.back().data(),
                               theta_g_.back().size(), quant::DType::kF32);
    (void)registry_.add_tensor(fmt::format("sync.momentum.{}", f), momentum_.back().data(),
                               momentum_.back().size(), quant::DType::kF32);
  }
  (void)registry_.add_tensor("sync.counters", counters_.data(), counters_.size(),
                             quant::DType::kU64);
  if (adaptive_)
    (void)registry_.add_tensor("sync.overlap", overlap_, std::size(overlap_), quant::DType::kU64);
  (void)registry_.add_tensor("sync.config." + config, &config_tag_, 1, quant::DType::kU8);
}

size_t SharedState::bytes() const {
  size_t total = counters_.size() * sizeof(uint64_t) + (adaptive_ ? sizeof overlap_ : 0) + 1;
  for (size_t f = 0; f < theta_g_.size(); ++f)
    total += (theta_g_[f].size() + momentum_[f].size()) * sizeof(float);
  return total;
}

}  // namespace longhaul::sync
