// The progress line: step, loss, tokens/s and ETA (a peer's also bytes sent and time blocked, and
// with the sync engine the overlap it chose: docs/trainer.md names every field). On a terminal one
// line is redrawn in place; otherwise (a log file, CI) a plain line is printed every so often.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace longhaul::train::cli {

struct ProgressState {
  std::int64_t step = 0, total = 0;
  float loss = 0.0f;              // smoothed training loss
  std::optional<float> val_loss;  // latest validation loss
  double tokens_per_s = 0.0;
  double eta_s = 0.0;
  std::optional<double> sent_bytes;  // a peer's: everything its communicator sent so far
  std::optional<double> blocked_s;   // a peer's: time it waited for the group
  // A peer's: the share of its last steps' time (BlockedWindow) spent blocked.
  std::optional<double> blocked_fraction;
  // The sync engine's overlap (docs/overlap.md): τ in effect, the steps the slowest peer needed
  // over the last cycle (0: none reported yet), this peer's last sync time (a round's launch to
  // its result ready here; 0: none measured yet) and compute time per step.
  struct Overlap {
    std::uint32_t tau = 0, needed = 0;
    double sync_s = 0, step_s = 0;
  };
  std::optional<Overlap> overlap;
};

// The share of the last kSteps steps' time that was spent blocked: a fixed ring, so the figure
// follows what the engine does now rather than the run's average.
class BlockedWindow {
 public:
  static constexpr std::size_t kSteps = 20;
  void add(double wall_s, double blocked_s);
  // None before the first step with any time.
  std::optional<double> fraction() const;

 private:
  std::array<double, kSteps> wall_{}, blocked_{};
  std::size_t next_ = 0;
};

class Progress {
 public:
  Progress();
  void update(const ProgressState& s);
  // Ends the redrawn line (before other output, and at the end).
  void finish();

 private:
  bool tty_;
  bool dirty_ = false;
  std::int64_t last_plain_step_ = -1;
};

}  // namespace longhaul::train::cli
