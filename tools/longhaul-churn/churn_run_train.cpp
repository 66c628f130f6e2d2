// The train workload's part of ChurnRun (--workload train): the peers' final summaries, the end
// of the run once every survivor has trained to the end, and the report of its figures.
#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "churn_run.hpp"

namespace longhaul_churn {

namespace {

constexpr double kExitAfterSummaryMs = 15000;

}  // namespace

// A train peer's last line. Once a survivor has trained to the end the group admits nobody any
// more: a replacement still waiting to be admitted is dismissed (it would wait for ever, or start
// a group of its own once the others are gone).
void ChurnRun::on_train_summary(PeerProc& p, const TrainSummary& summary) {
  train_summaries_.push_back(summary);
  monitor_.on_finished(p.name);
  p.finished_at_ms = now_ms();
  if (summary.stopped) return;
  // A survivor trained to the end: the group applies no more rounds.
  monitor_.end_progress(p.finished_at_ms);
  for (const std::string& name : monitor_.not_joined()) {
    for (auto& q : peers_) {
      if (q->name != name || !q->child->running()) continue;
      append_log(name, "dismissed: the group finished before admitting it (SIGKILL)");
      monitor_.on_dismissed(name);
      q->child->send_signal(SIGKILL);
      ++unadmitted_;
    }
  }
}

// The survivors train to the end by themselves; a peer that printed its summary must exit soon
// after (it only leaves the group).
void ChurnRun::tick_train_final(double now) {
  if (std::none_of(peers_.begin(), peers_.end(),
                   [](const auto& p) { return p->child->running(); })) {
    finish_train();
    return;
  }
  for (const auto& p : peers_) {
    if (p->child->running() && p->finished_at_ms >= 0 &&
        now - p->finished_at_ms > kExitAfterSummaryMs) {
      monitor_.add_violation(now, p->name + " did not exit within 15 s of its final summary");
      p->finished_at_ms = -1;
    }
  }
}

// Every peer has exited: the survivors' summaries must agree, and (a churn run) the loss must be
// close to the reference's.
void ChurnRun::finish_train() {
  const double now = now_ms();
  const TrainEnd end = judge_survivors(train_summaries_, flags_.train_steps);
  for (const std::string& problem : end.problems) monitor_.add_violation(now, problem);
  monitor_.finish_progress(now);
  TrainRun r;
  r.val_loss = end.val_loss;
  r.steps = flags_.train_steps;
  r.world_steps = monitor_.summary().world_steps;
  r.tokens = r.world_steps * static_cast<uint64_t>(end.tokens_per_batch);
  r.survivors = end.survivors;
  r.unadmitted = unadmitted_;
  r.seconds = (now - churn_start_ms_) / 1000;
  r.churn_seconds = (churn_end_ms_ - churn_start_ms_) / 1000;
  if (end.problems.empty()) train_result_ = r;
  shutdown(monitor_.violations().empty() ? 0 : 1, "");
}

void ChurnRun::judge_loss(const TrainRun& reference) {
  reference_ = reference;
  if (!train_result_) return;
  loss_comparison_ =
      compare_losses(train_result_->val_loss, reference.val_loss, flags_.max_loss_ratio);
  if (!loss_comparison_->problem) return;
  monitor_.add_violation(now_ms(), *loss_comparison_->problem);
  if (exit_status_ == 0) exit_status_ = 1;
}

void ChurnRun::fail(int exit_status, const std::string& why) {
  exit_status_ = exit_status;
  fatal_ = why;
}

void ChurnRun::print_train_lines(const TrainFigures& t) const {
  const auto& r = t.run;
  const auto& ref = t.reference;
  if (r)
    std::printf(
        "  training      %zu survivors at step %lld, %.1f s (%.1f s of churn); %llu tokens; %llu "
        "replacements never admitted\n",
        r->survivors, static_cast<long long>(flags_.train_steps), r->seconds, r->churn_seconds,
        static_cast<unsigned long long>(r->tokens), static_cast<unsigned long long>(r->unadmitted));
  if (ref)
    std::printf(
        "  reference     no churn, equal tokens: %zu peers at step %lld, %.1f s; %llu tokens; "
        "val loss %.5f\n",
        ref->survivors, static_cast<long long>(ref->steps), ref->seconds,
        static_cast<unsigned long long>(ref->tokens), ref->val_loss);
  if (r && t.ratio)
    std::printf("  val loss      %.5f, %.4f times the reference's (at most %.4f)\n", r->val_loss,
                *t.ratio, flags_.max_loss_ratio);
}

// The reference run of the train workload: one line when it passed, the full report otherwise.
void ChurnRun::report_reference() {
  if (exit_status_ == 0 && train_result_) {
    const TrainRun& r = *train_result_;
    const ProgressFigures p = monitor_.summary().progress;
    std::printf(
        "longhaul-churn: reference run without churn: %zu peers, %lld steps, %.1f s, "
        "val loss %.5f, %llu tokens; %llu rounds applied, at most %.2f s apart (bound %.2f s), "
        "val loss of theta_g %.1f%% lower in the last quarter of its evaluations\n",
        r.survivors, static_cast<long long>(r.steps), r.seconds, r.val_loss,
        static_cast<unsigned long long>(r.tokens),
        static_cast<unsigned long long>(p.rounds_applied.value_or(0)), p.longest_no_round_ms / 1000,
        p.bound_ms / 1000, 100 * p.val_loss_drop.value_or(0));
    std::fflush(stdout);
    return;
  }
  std::printf("longhaul-churn: the reference run without churn failed\n");
  report();
}

}  // namespace longhaul_churn
