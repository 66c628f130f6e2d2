// Learning rate: linear warmup to max_lr over warmup_steps, then cosine decay to min_lr at
// total_steps (and min_lr after). Steps count from 0.
#pragma once

#include <cstdint>

namespace longhaul::train {

struct LrSchedule {
  float max_lr = 3e-3f;
  float min_lr = 3e-4f;
  std::int64_t warmup_steps = 50;
  std::int64_t total_steps = 1000;

  float at(std::int64_t step) const;
};

}  // namespace longhaul::train
