// The progress line: step, loss, tokens/s and ETA (a peer's also bytes sent and time blocked). On a
// terminal one line is redrawn in place; otherwise (a log file, CI) a plain line is printed every
// so often.
#pragma once

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
