#include "master/sync_pace.hpp"

#include <algorithm>

namespace longhaul::master {
namespace {

using Lag = SyncPace::Lag;

// The lower median: of an even count, the smaller middle value, so that the slower half of the
// answers (where one rogue of two sits) never sets it.
Lag lower_median(std::vector<Lag> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

void SyncPace::record(uint32_t group, Phase phase, const std::vector<Lag>& lags) {
  if (lags.empty()) return;
  auto& syncs = groups_[{group, phase}];
  syncs.push_back(lags);
  while (syncs.size() > rule_.window) syncs.pop_front();
}

SyncPace::Lag SyncPace::deadline(uint32_t group, Phase phase, Lag ceiling) const {
  auto it = groups_.find({group, phase});
  if (it == groups_.end()) return ceiling;  // nothing learned yet: the old constant
  std::vector<Lag> samples;
  for (const auto& sync : it->second) samples.insert(samples.end(), sync.begin(), sync.end());
  const Lag median = lower_median(samples);
  for (Lag& s : samples) s = s > median ? s - median : median - s;
  const Lag mad = lower_median(std::move(samples));
  // MAD alone collapses to 0 for a group whose members answer at very regular times; half the
  // median keeps room for their jitter.
  const Lag spread = std::max(kSpreadMads * mad, median / 2);
  return std::clamp(median + spread, std::min(rule_.floor, ceiling), ceiling);
}

uint32_t SyncPace::count(PeerId id, std::string why) {
  auto& syncs = members_[id];
  syncs.push_back(std::move(why));
  while (syncs.size() > rule_.window) syncs.pop_front();
  return static_cast<uint32_t>(
      std::count_if(syncs.begin(), syncs.end(), [](const std::string& w) { return !w.empty(); }));
}

std::vector<std::string> SyncPace::reasons(PeerId id) const {
  std::vector<std::string> out;
  auto it = members_.find(id);
  if (it == members_.end()) return out;
  for (const auto& why : it->second)
    if (!why.empty()) out.push_back(why);
  return out;
}

}  // namespace longhaul::master
