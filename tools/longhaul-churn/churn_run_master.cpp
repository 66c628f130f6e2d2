// Master restarts during a churn run (--master-restart-ms, issue 27): the master is SIGKILLed and
// started again on the same port with its journal. Nothing else changes: every rule the monitor
// applies (no hang, no unexpected exit, bit-identical state) must hold through it.
#include <csignal>

#include "churn_run.hpp"

namespace longhaul_churn {

void ChurnRun::schedule_master_restart() {
  next_master_restart_ms_ = jittered_deadline(flags_.master_restart_ms);
}

void ChurnRun::tick_master_restart(double now) {
  if (master_restarting_ || next_master_restart_ms_ < 0 || now < next_master_restart_ms_) return;
  master_restarting_ = true;
  append_log("master", "SIGKILL: restart");
  master_->send_signal(SIGKILL);
}

void ChurnRun::bring_master_back() {
  master_restarting_ = false;
  master_down_ = false;
  start_master();
  if (!master_) return;  // start_master has shut the run down with the reason
  monitor_.on_master_restart();
  schedule_master_restart();
}

}  // namespace longhaul_churn
