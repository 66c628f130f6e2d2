#include "sync/schedule.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace longhaul::sync {

Result<FragmentSchedule> FragmentSchedule::make(uint32_t sync_every, uint32_t fragments,
                                                uint32_t delay) {
  if (sync_every == 0) return invalid_argument("H (sync_every) must be at least 1");
  if (fragments == 0) return invalid_argument("the number of fragments must be at least 1");
  if (fragments > sync_every)
    return invalid_argument(
        fmt::format("{} fragments cannot each sync once in H = {} steps", fragments, sync_every));
  const uint32_t spacing = sync_every / fragments;
  if (delay >= sync_every)
    return invalid_argument(
        fmt::format("tau = {} must be below H = {}: a round must be applied "
                    "before the fragment's next one launches",
                    delay, sync_every));
  if (fragments > 1 && delay > spacing)
    return invalid_argument(
        fmt::format("tau = {} exceeds H/F = {}: two fragments' rounds would "
                    "travel at once",
                    delay, spacing));
  return FragmentSchedule(sync_every, fragments, delay);
}

uint32_t FragmentSchedule::max_delay(uint32_t sync_every, uint32_t fragments) {
  if (sync_every == 0 || fragments == 0) return 0;
  const uint32_t below_h = sync_every - 1;
  return fragments == 1 ? below_h : std::min(sync_every / fragments, below_h);
}

uint64_t FragmentSchedule::round_launched(uint64_t step, uint32_t fragment) const {
  const uint64_t offset = uint64_t{fragment} * (h_ / f_);
  if (step < h_ + offset || (step - offset) % h_ != 0) return 0;
  return (step - offset) / h_;
}

}  // namespace longhaul::sync
