#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace longhaul::train::cli {

namespace {

std::string duration(double s) {
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// "12.3 MB": decimal units, as the network's figures are usually given.
std::string bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

std::string line(const ProgressState& s, int bar_width) {
  const double frac = s.total > 0 ? static_cast<double>(s.step) / static_cast<double>(s.total) : 0;
  std::string bar;
  if (bar_width > 0) {
    const int filled = static_cast<int>(frac * bar_width);
    // fmt rather than operator+: GCC 12 at -O3 warns (-Wrestrict) falsely on the latter.
    bar = fmt::format("[{:#<{}}{:.<{}}] ", "", filled, "", bar_width - filled);
  }
  std::string val = s.val_loss ? fmt::format(" val {:.4f}", *s.val_loss) : "";
  std::string peer;
  if (s.sent_bytes) peer += fmt::format(" | sent {}", bytes(*s.sent_bytes));
  if (s.blocked_s) peer += fmt::format(" | blocked {:.1f}s", *s.blocked_s);
  return fmt::format("{}step {}/{} loss {:.4f}{} | {:.0f} tok/s{} | ETA {}", bar, s.step, s.total,
                     s.loss, val, s.tokens_per_s, peer, duration(s.eta_s));
}

}  // namespace

Progress::Progress() : tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::update(const ProgressState& s) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line(s, 30).c_str());
    std::fflush(stderr);
    dirty_ = true;
    return;
  }
  // About twenty lines per run, plus the last step.
  const std::int64_t every = s.total >= 20 ? s.total / 20 : 1;
  if (s.step == s.total || s.step - last_plain_step_ >= every) {
    std::fprintf(stderr, "%s\n", line(s, 0).c_str());
    last_plain_step_ = s.step;
  }
}

void Progress::finish() {
  if (tty_ && dirty_) std::fprintf(stderr, "\n");
  dirty_ = false;
}

}  // namespace longhaul::train::cli
