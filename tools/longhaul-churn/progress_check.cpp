#include "progress_check.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace longhaul_churn {
namespace {

std::string seconds(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", ms / 1000.0);
  return buf;
}

std::string number(double x, const char* format = "%.4f") {
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, x);
  return buf;
}

// The median of v (0 when empty); reorders v.
double median(std::vector<float>& v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

void ProgressCheck::on_join(uint32_t rail, uint64_t round_every, double now) {
  Rail& r = rails_[rail];
  if (r.started_ms < 0) {
    r.started_ms = now;
    r.last_round_ms = now;
  }
  r.round_every = std::max<uint64_t>(r.round_every, std::max<uint64_t>(round_every, 1));
}

void ProgressCheck::on_step(uint32_t rail, uint64_t step, double now) {
  Rail& r = rails_[rail];
  if (step <= r.max_step) return;
  // Only steps that follow a step seen before are timed: the wait before the first one is the
  // start, not a step.
  if (r.max_step_ms >= 0)
    r.step_ms.push_back(
        static_cast<float>((now - r.max_step_ms) / static_cast<double>(step - r.max_step)));
  r.max_step = step;
  r.max_step_ms = now;
}

void ProgressCheck::on_rounds(uint32_t rail, uint64_t added, double now) {
  Rail& r = rails_[rail];
  r.counted = true;
  if (added == 0 || end_ms_ >= 0) return;
  if (r.started_ms < 0) r.started_ms = r.last_round_ms = now;
  r.longest_ms = std::max(r.longest_ms, now - r.last_round_ms);
  r.last_round_ms = now;
  r.rounds += added;
  r.stall_reported = false;
}

void ProgressCheck::on_val(uint64_t step, double loss) {
  val_.try_emplace(step, loss);
}

void ProgressCheck::end(double now) {
  if (end_ms_ < 0) end_ms_ = now;
}

double ProgressCheck::bound_ms(const Rail& r) const {
  if (limits_.max_no_round_ms > 0) return limits_.max_no_round_ms;
  std::vector<float> steps = r.step_ms;
  return limits_.recovery_ms + kRoundIntervals * static_cast<double>(r.round_every) * median(steps);
}

double ProgressCheck::open_gap_ms(const Rail& r, double now) const {
  if (r.started_ms < 0) return 0;
  return (end_ms_ >= 0 ? end_ms_ : now) - r.last_round_ms;
}

std::string ProgressCheck::stall_text(uint32_t rail, const Rail& r, double gap_ms) const {
  std::vector<float> steps = r.step_ms;
  const std::string how =
      limits_.max_no_round_ms > 0
          ? "--max-no-round-ms"
          : "--hang-ms " + seconds(limits_.recovery_ms) + " + " + number(kRoundIntervals, "%.0f") +
                " x " + std::to_string(r.round_every) + " step(s) per round x the median step " +
                number(median(steps), "%.1f") + " ms";
  return (rails_.size() > 1 ? "rail " + std::to_string(rail) + ": the" : "the") +
         " group applied no round for " + seconds(gap_ms) + " (bound " + seconds(bound_ms(r)) +
         ": " + how + "); " + std::to_string(r.rounds) + " rounds applied before, group step " +
         std::to_string(r.max_step);
}

std::vector<std::string> ProgressCheck::check(double now) {
  std::vector<std::string> out;
  for (auto& [rail, r] : rails_) {
    if (!r.counted || r.stall_reported) continue;
    const double gap = open_gap_ms(r, now);
    // The derived bound is never below recovery_ms: most ticks need no median.
    if (gap <= std::min(limits_.recovery_ms, limits_.max_no_round_ms > 0
                                                 ? limits_.max_no_round_ms
                                                 : std::numeric_limits<double>::infinity()))
      continue;
    if (gap <= bound_ms(r)) continue;
    r.stall_reported = true;
    out.push_back(stall_text(rail, r, gap));
  }
  return out;
}

std::vector<std::string> ProgressCheck::finish(double now) {
  end(now);
  std::vector<std::string> out = check(now);
  for (auto& [rail, r] : rails_) {
    // A gap closed by a round between two ticks: check() never saw it open past the bound.
    if (!r.counted || r.stall_reported || r.longest_ms <= bound_ms(r)) continue;
    r.stall_reported = true;
    out.push_back(stall_text(rail, r, r.longest_ms));
  }
  if (auto loss = judge_loss()) out.push_back(*loss);
  return out;
}

std::optional<std::string> ProgressCheck::judge_loss() const {
  const ProgressFigures f = figures(end_ms_);
  if (limits_.min_loss_drop <= 0 || !f.val_loss_drop || *f.val_loss_drop >= limits_.min_loss_drop)
    return std::nullopt;
  const size_t k = val_.size() / 4;
  return "the validation loss of theta_g did not fall: the last " + std::to_string(k) +
         " evaluations (to step " + std::to_string(val_.rbegin()->first) + ") average " +
         number(*f.val_loss_last) + ", the first " + std::to_string(k) + " (from step " +
         std::to_string(val_.begin()->first) + ") " + number(*f.val_loss_first) + ": " +
         number(100 * *f.val_loss_drop, "%.2f") + "% lower, at least " +
         number(100 * limits_.min_loss_drop, "%.2f") + "% required (--min-loss-drop)";
}

ProgressFigures ProgressCheck::figures(double now) const {
  ProgressFigures f;
  double first_ms = -1, smallest_bound = -1;
  for (const auto& [rail, r] : rails_) {
    if (r.started_ms < 0) continue;
    if (first_ms < 0 || r.started_ms < first_ms) first_ms = r.started_ms;
    if (!r.counted) continue;
    f.rounds_applied = f.rounds_applied.value_or(0) + r.rounds;
    f.longest_no_round_ms = std::max({f.longest_no_round_ms, r.longest_ms, open_gap_ms(r, now)});
    const double b = bound_ms(r);
    if (smallest_bound >= 0 && b >= smallest_bound) continue;
    smallest_bound = f.bound_ms = b;
    std::vector<float> steps = r.step_ms;
    f.median_step_ms = median(steps);
    f.round_every_steps = r.round_every;
  }
  if (first_ms >= 0) f.clock_ms = (end_ms_ >= 0 ? end_ms_ : now) - first_ms;
  if (f.rounds_applied && f.clock_ms > 0)
    f.rounds_per_min = static_cast<double>(*f.rounds_applied) / (f.clock_ms / 60000.0);
  f.val_evaluations = val_.size();
  if (val_.size() >= kMinEvaluations) {
    const size_t k = val_.size() / 4;
    double first = 0, last = 0;
    size_t i = 0;
    for (const auto& [step, loss] : val_) {
      if (i < k) first += loss;
      if (i >= val_.size() - k) last += loss;
      ++i;
    }
    f.val_loss_first = first / static_cast<double>(k);
    f.val_loss_last = last / static_cast<double>(k);
    f.val_loss_drop = (*f.val_loss_first - *f.val_loss_last) / *f.val_loss_first;
  }
  return f;
}

}  // namespace longhaul_churn
