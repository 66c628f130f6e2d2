// Whether the group trains at all (issue 51): hashes that agree everywhere say nothing about a
// group that drops every round, since dropped rounds leave theta_g equal on every peer. This
// check watches the rounds the group applies over time and, in the train workload, theta_g's
// validation loss over the run (docs/churn.md, "Progress"). Pure bookkeeping: the caller passes
// the time (ms since the start) with every event.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace longhaul_churn {

struct ProgressLimits {
  // The longest a group may wait out one recovery: --hang-ms, the bound the tool already puts on
  // a single peer going without a step.
  double recovery_ms = 15000;
  // > 0: the no-round bound, given (--max-no-round-ms); 0: derived, recovery_ms plus
  // kRoundIntervals expected round intervals (steps per round x the median group step).
  double max_no_round_ms = 0;
  // The validation loss of the last quarter of theta_g's evaluations must be at least this
  // fraction below the first quarter's (--min-loss-drop); 0: no loss check.
  double min_loss_drop = 0.01;
};

// The run's progress figures (the --json fields of docs/churn.md, "Progress").
struct ProgressFigures {
  std::optional<uint64_t> rounds_applied;  // absent: no peer reported a count of its rounds
  double rounds_per_min = 0;
  double clock_ms = 0;             // from the first join to the end of stepping
  double longest_no_round_ms = 0;  // the longest time any rail's group went without a round
  double bound_ms = 0;             // the smallest bound over the rails
  double median_step_ms = 0;       // of the rail whose bound that is
  uint64_t round_every_steps = 1;  // ... and its steps between rounds
  size_t val_evaluations = 0;
  // The mean loss of the first and the last quarter of the evaluations, and the fraction the
  // last is below the first; absent when too few evaluations were reported to judge.
  std::optional<double> val_loss_first, val_loss_last, val_loss_drop;
};

class ProgressCheck {
 public:
  // Expected round intervals in the derived bound: the round in flight when a fault struck, its
  // rerun over the survivors, and slack for two more (a joiner's admission, a slow machine).
  static constexpr double kRoundIntervals = 4;
  // Fewer evaluations than this are not judged: a quarter of them is then under two points.
  static constexpr size_t kMinEvaluations = 8;

  explicit ProgressCheck(ProgressLimits limits) : limits_(limits) {}

  // A member of `rail`'s group joined; the rail's clock starts at the first. `round_every`: the
  // steps between two rounds as the member is configured (1 for longhaul-peer: every step is one).
  void on_join(uint32_t rail, uint64_t round_every, double now);
  // A member reported the group's step (longhaul-peer: revision) `step`.
  void on_step(uint32_t rail, uint64_t step, double now);
  // A member reported its count of rounds: `added` rounds the group had not been seen to apply.
  void on_rounds(uint32_t rail, uint64_t added, double now);
  // theta_g's validation loss after `step` (the train workload); the first report of a step wins.
  void on_val(uint64_t step, double loss);
  // The group stops stepping on purpose (the end of the run): the clocks stop.
  void end(double now);
  // Rails whose group has gone without a round for longer than the bound: one text each, once per
  // stall.
  std::vector<std::string> check(double now);
  // At the end: stalls check() has not reported, and the loss rule.
  std::vector<std::string> finish(double now);
  ProgressFigures figures(double now) const;

 private:
  struct Rail {
    double started_ms = -1;     // the first join
    double last_round_ms = -1;  // the last round (or the start)
    double longest_ms = 0;      // the longest closed gap
    uint64_t rounds = 0;
    bool counted = false;  // a member reported a count of rounds
    uint64_t round_every = 1;
    uint64_t max_step = 0;
    double max_step_ms = -1;
    std::vector<float> step_ms;  // the time of each group step, from the first report of each
    bool stall_reported = false;
  };
  double bound_ms(const Rail& r) const;
  double open_gap_ms(const Rail& r, double now) const;
  std::string stall_text(uint32_t rail, const Rail& r, double gap_ms) const;
  std::optional<std::string> judge_loss() const;

  ProgressLimits limits_;
  std::map<uint32_t, Rail> rails_;
  std::map<uint64_t, double> val_;  // step -> loss
  double end_ms_ = -1;
};

}  // namespace longhaul_churn
