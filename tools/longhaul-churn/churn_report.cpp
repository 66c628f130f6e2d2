// longhaul-churn's output: the live status line and the final report (human lines and, with
// --json, one JSON object).
#include <unistd.h>

#include <cstdio>

#include "churn_run.hpp"
#include "churn_summary.hpp"

namespace longhaul_churn {

void ChurnRun::print_status(bool final_line) {
  if (!status_tty_ && !flags_.status) return;
  const double now = now_ms();
  if (!final_line && now - last_status_ms_ < (status_tty_ ? 500 : 5000)) return;
  last_status_ms_ = now;
  const auto s = monitor_.summary();
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "[%6ss] peers %zu (%zu stepping, %zu stopped) rev %llu | kills %llu terms %llu "
                "stops %llu joins %llu "
                "| retried %llu | recovery p50 %.0f p99 %.0f ms | violations %zu",
                fmt_seconds(now - churn_start_ms_).c_str(), monitor_.running(),
                monitor_.joined_running(), monitor_.stopped(),
                static_cast<unsigned long long>(s.group_steps),
                static_cast<unsigned long long>(s.kills), static_cast<unsigned long long>(s.terms),
                static_cast<unsigned long long>(s.stops), static_cast<unsigned long long>(s.joins),
                static_cast<unsigned long long>(s.aborted_ops + s.sync_retries), s.recovery_p50_ms,
                s.recovery_p99_ms, monitor_.violations().size());
  if (status_tty_)
    std::fprintf(stderr, "\r\033[K%s%s", buf, final_line ? "\n" : "");
  else
    std::fprintf(stderr, "%s\n", buf);
  std::fflush(stderr);
}

void ChurnRun::print_progress_lines(const RunMonitor::Summary& s) const {
  const ProgressFigures& p = s.progress;
  if (p.rounds_applied)
    std::printf(
        "  progress      %llu rounds applied in %.1f s (%.1f per minute); longest without one "
        "%.2f s, bound %.2f s (%llu step(s) per round, median step %.1f ms)\n",
        static_cast<unsigned long long>(*p.rounds_applied), p.clock_ms / 1000, p.rounds_per_min,
        p.longest_no_round_ms / 1000, p.bound_ms / 1000,
        static_cast<unsigned long long>(p.round_every_steps), p.median_step_ms);
  else
    std::printf("  progress      no peer reported a count of its rounds\n");
  if (p.val_loss_drop)
    std::printf(
        "  val loss      theta_g over %zu evaluations: first quarter %.4f, last %.4f (%.1f%% "
        "lower; at least %.1f%% required)\n",
        p.val_evaluations, *p.val_loss_first, *p.val_loss_last, 100 * *p.val_loss_drop,
        100 * flags_.min_loss_drop);
  else if (train())
    std::printf("  val loss      %zu evaluations of theta_g: too few to judge (fewer than %zu)\n",
                p.val_evaluations, ProgressCheck::kMinEvaluations);
}

void ChurnRun::report() {
  if (flags_.max_recovery_ms > 0 && exit_status_ == 0) {
    const auto r = monitor_.summary();
    if (r.recovery_p99_ms > flags_.max_recovery_ms)
      monitor_.add_violation(
          now_ms(), "recovery p99 " + std::to_string(static_cast<int>(r.recovery_p99_ms)) +
                        " ms exceeds --max-recovery-ms " + std::to_string(flags_.max_recovery_ms));
    if (r.unrecovered > 0)
      monitor_.add_violation(now_ms(),
                             std::to_string(r.unrecovered) + " kill(s) never recovered from");
    if (!monitor_.violations().empty()) exit_status_ = 1;
  }
  const auto s = monitor_.summary();
  const auto& v = monitor_.violations();
  std::printf("longhaul-churn: %s\n", exit_status_ == 0   ? "PASS"
                                      : exit_status_ == 1 ? "FAIL (violations)"
                                                          : ("ERROR: " + fatal_).c_str());
  std::printf("  duration      %.1f s of churn, %u peers, seed %llu, %s\n", flags_.duration_s,
              flags_.peers, static_cast<unsigned long long>(flags_.seed),
              flags_.wanem_fraction > 0 ? ("wanem " + std::to_string(flags_.wanem_fraction)).c_str()
                                        : "no wanem");
  std::printf("  steps         %llu (group %s), %llu peer-steps, %llu hash comparisons\n",
              static_cast<unsigned long long>(s.group_steps), train() ? "steps" : "revisions",
              static_cast<unsigned long long>(s.peer_steps),
              static_cast<unsigned long long>(s.hashes_compared));
  std::printf(
      "  churn         %llu SIGKILL, %llu SIGTERM (%s), %llu SIGSTOP; %llu peers started, "
      "%llu joins, %llu evicted after a long stop\n",
      static_cast<unsigned long long>(s.kills), static_cast<unsigned long long>(s.terms),
      // Train peers end by themselves: no final SIGTERM.
      train() ? "graceful leaves" : "incl. the final leave",
      static_cast<unsigned long long>(s.stops), static_cast<unsigned long long>(s.spawned),
      static_cast<unsigned long long>(s.joins),
      static_cast<unsigned long long>(s.evicted_after_stop));
  if (flags_.nodes > 0)
    std::printf("  nodes         %u nodes x %u rails; %llu ranks ended with their node evicted\n",
                flags_.nodes, flags_.rails, static_cast<unsigned long long>(s.node_evictions));
  if (flags_.weight_reset + flags_.weight_blackhole > 0)
    std::printf("  link faults   %llu resets, %llu black holes\n",
                static_cast<unsigned long long>(s.link_resets),
                static_cast<unsigned long long>(s.blackholes));
  if (flags_.master_restart_ms > 0)
    std::printf("  master        %llu restarts (SIGKILL, started again with its journal)\n",
                static_cast<unsigned long long>(s.master_restarts));
  std::printf("  retried       %llu all-reduce steps aborted and retried, %llu syncs retried\n",
              static_cast<unsigned long long>(s.aborted_ops),
              static_cast<unsigned long long>(s.sync_retries));
  std::printf(
      "  recovery      %zu measured: p50 %.0f ms, p99 %.0f ms, max %.0f ms; %llu unrecovered\n",
      s.recoveries_ms.size(), s.recovery_p50_ms, s.recovery_p99_ms, s.recovery_max_ms,
      static_cast<unsigned long long>(s.unrecovered));
  print_progress_lines(s);
  std::optional<TrainFigures> train_figures;
  if (train()) {
    train_figures = TrainFigures{train_result_, reference_, std::nullopt};
    if (loss_comparison_) train_figures->ratio = loss_comparison_->ratio;
    print_train_lines(*train_figures);
  }
  std::printf("  violations    %zu\n", v.size());
  for (const auto& text : v) std::printf("  VIOLATION %s\n", text.c_str());
  if (exit_status_ != 0 || !flags_.log_dir.empty() || flags_.keep_logs)
    std::printf("  logs          %s\n", log_dir_.c_str());
  if (flags_.json)
    std::printf("%s\n", summary_json(flags_, exit_status_, s, v.size(), train_figures).c_str());
  std::fflush(stdout);
}

}  // namespace longhaul_churn
