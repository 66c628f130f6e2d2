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

// "410ms", "2.35s": a sync or a step's compute, short enough for the line.
std::string short_duration(double s) {
  return s < 1.0 ? fmt::format("{:.0f}ms", s * 1e3) : fmt::format("{:.2f}s", s);
}

// " | sent 1.2 MB | blocked 3.2s (12%) | tau 2 need 3 sync 410ms compute 98ms": the percentage is
// of the last BlockedWindow::kSteps steps; "-" for a figure not measured yet.
std::string peer_fields(const ProgressState& s) {
  std::string out;
  if (s.sent_bytes) out += fmt::format(" | sent {}", bytes(*s.sent_bytes));
  if (s.blocked_s) {
    out += fmt::format(" | blocked {:.1f}s", *s.blocked_s);
    if (s.blocked_fraction) out += fmt::format(" ({:.0f}%)", 100.0 * *s.blocked_fraction);
  }
  if (s.overlap) {
    const ProgressState::Overlap& v = *s.overlap;
    out += fmt::format(" | tau {} need {} sync {} compute {}", v.tau,
                       v.needed > 0 ? std::to_string(v.needed) : std::string("-"),
                       v.sync_s > 0 ? short_duration(v.sync_s) : std::string("-"),
                       v.step_s > 0 ? short_duration(v.step_s) : std::string("-"));
  }
  return out;
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
  return fmt::format("{}step {}/{} loss {:.4f}{} | {:.0f} tok/s{} | ETA {}", bar, s.step, s.total,
                     s.loss, val, s.tokens_per_s, peer_fields(s), duration(s.eta_s));
}

}  // namespace

void BlockedWindow::add(double wall_s, double blocked_s) {
  wall_[next_] = wall_s;
  blocked_[next_] = blocked_s;
  next_ = (next_ + 1) % kSteps;
}

std::optional<double> BlockedWindow::fraction() const {
  double wall = 0, blocked = 0;
  for (std::size_t i = 0; i < kSteps; ++i) {
    wall += wall_[i];
    blocked += blocked_[i];
  }
  if (wall <= 0) return std::nullopt;
  return blocked / wall;
}

Progress::Progress() : tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::update(const ProgressState& s) {
  if (tty_) {
    // A narrower bar beside the overlap's fields keeps the line within a terminal's width.
    std::fprintf(stderr, "\r\033[K%s", line(s, s.overlap ? 12 : 30).c_str());
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
