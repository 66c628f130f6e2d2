#include "train/lr_schedule.hpp"

#include <cmath>

namespace longhaul::train {

float LrSchedule::at(std::int64_t step) const {
  if (step < warmup_steps) {
    return static_cast<float>(static_cast<double>(max_lr) * static_cast<double>(step + 1) /
                              static_cast<double>(warmup_steps));
  }
  if (step >= total_steps || total_steps <= warmup_steps) return min_lr;
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
  return static_cast<float>(min_lr + (static_cast<double>(max_lr) - min_lr) * cosine);
}

}  // namespace longhaul::train
