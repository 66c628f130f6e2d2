// One churn run on a libuv loop: starts the master (and the WAN emulator), keeps --peers
// longhaul-peer (or, --workload train, longhaul-train) processes running, disrupts them on a
// seeded random schedule, feeds everything they print to a RunMonitor, and at the end stops
// everyone and reports.
//
// Phases: starting (master port, emulator READY) -> churn (for --duration) -> final (no more
// churn; every survivor must step within --grace-ms) -> leaving (SIGTERM: each must leave
// cleanly) -> done. The train workload's churn also ends when the group reaches 90% of
// --train-steps, and its final phase waits for the survivors to train to the end and exit with
// their summaries (train_outcome.hpp judges them); there is no leaving phase. Any fatal problem
// or SIGINT/SIGTERM skips to shutdown, which SIGKILLs every child still running (by pid) and runs
// the loop until all are reaped.
#pragma once

#include <uv.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "churn_flags.hpp"
#include "churn_summary.hpp"
#include "run_monitor.hpp"
#include "train_outcome.hpp"

namespace longhaul_churn {

struct Binaries {
  std::string master, peer, train, wanem;
};

// Milliseconds as seconds with one decimal ("12.3"), for logs and the status line.
std::string fmt_seconds(double ms);

// A churn run, or the train workload's churn-free reference run (no disruption, a short report,
// no JSON line).
enum class RunKind { kChurn, kReference };

class ChurnRun {
 public:
  ChurnRun(const Flags& flags, Binaries bins, std::string log_dir, RunKind kind = RunKind::kChurn);
  ~ChurnRun();
  // Runs to the end and reports; returns the process exit status (0 clean, 1 violations, 3
  // setup failure, 130 interrupted).
  int run() {
    execute();
    return report_run();
  }
  // The two halves of run(), for the train workload, which judges the churn run against a
  // reference run between them: execute() runs to the end without reporting and returns the
  // exit status so far; report_run() prints the report (and --json line) and returns the final
  // exit status.
  int execute();
  int report_run();
  // The train workload, between execute() and report_run(): the churn-free reference run's
  // result; a final loss above --max-loss-ratio times the reference's becomes a violation.
  void judge_loss(const TrainRun& reference);
  // The train workload, between execute() and report_run(): the reference run could not be
  // judged against (it failed with `exit_status`).
  void fail(int exit_status, const std::string& why);
  // The train workload's result, once execute() returned with the survivors judged.
  const std::optional<TrainRun>& train_result() const { return train_result_; }

 private:
  enum class Phase { kStarting, kChurn, kFinal, kLeaving, kShutdown };
  struct PeerProc {
    std::string name;
    std::unique_ptr<ChildProcess> child;
    bool routed = false;
    double resume_at_ms = -1;    // a stopped peer gets SIGCONT then
    double heal_at_ms = -1;      // a black-holed route heals then
    bool leaving = false;        // SIGTERMed already: a second SIGTERM would make it exit at once
    int shard = 0;               // train: its --peer-index, which its replacement takes over
    double finished_at_ms = -1;  // train: when it printed its final summary
    std::string node;            // nodes: the node it is a rank of, and its rail
    uint32_t rail = 0;
  };
  struct Respawn {
    double at_ms;
    int shard;
    bool node = false;  // a whole new node (--nodes)
  };
  enum class Action { kKill, kTerm, kStop };

  double now_ms() const;
  void tick();
  void tick_starting(double now);
  void tick_churn(double now);
  void schedule_next_event();
  // now + mean_ms x uniform(0.5, 1.5), or -1 (never) when mean_ms is 0.
  double jittered_deadline(uint32_t mean_ms);
  // churn_run_faults.cpp
  void disrupt();
  // The next disruption's kind, drawn with the --mix weights.
  Action pick_action();
  // The action of a draw r below the signal weights' sum (--mix K:T:S).
  Action signal_action(uint32_t r) const;
  // Sends the action's signal to one peer and records it.
  void act(PeerProc& p, Action action);
  // Nodes (churn_nodes.cpp): a new node of --rails ranks; a disruption of one rank or a whole
  // node; a rank's exit (a node whose ranks have all gone is replaced).
  bool nodes() const { return flags_.nodes > 0; }
  void start_node();
  void disrupt_node();
  void on_rank_exit(const PeerProc& p);
  std::vector<PeerProc*> ranks_of(const std::string& node);
  PeerProc* find_peer(const std::string& name);
  void fault_link(PeerProc& p, bool blackhole);
  void heal_links(double now);
  bool prepare_security();
  void start_master();
  // Master restarts (churn_run_master.cpp, --master-restart-ms).
  void schedule_master_restart();
  void tick_master_restart(double now);
  void bring_master_back();
  void start_wanem();
  // The packet lab (--sites; churn_sites.cpp): longhaul-wanem --site ..., then the master in its
  // site once the lab is READY.
  bool sites() const { return !flags_.sites.empty(); }
  void start_lab();
  void on_site_line(const std::string& line);
  // The site a new peer goes to (round-robin); its namespace and address.
  const std::pair<std::string, std::string>& next_peer_site();
  bool train() const { return flags_.workload == Workload::kTrain; }
  void start_peer(int shard, bool join, const std::string& node = "", uint32_t rail = 0);
  void launch_peer(const std::string& name, bool routed, uint16_t advertise_port, int shard,
                   bool join, const std::string& node, uint32_t rail);
  void on_peer_line(PeerProc& p, const std::string& line);
  void on_train_summary(PeerProc& p, const TrainSummary& summary);
  void tick_train_final(double now);
  void finish_train();
  void report_reference();
  void print_train_lines(const TrainFigures& t) const;
  void on_wanem_line(const std::string& line);
  void wanem_command(const std::string& command, std::function<void(const std::string&)> on_answer);
  void begin_final();
  void begin_leaving();
  void shutdown(int exit_status, const std::string& why);
  void print_status(bool final_line);
  void report();
  void print_progress_lines(const RunMonitor::Summary& s) const;
  bool all_children_gone() const;
  std::string log_path(const std::string& name, const char* ext) const;
  void append_log(const std::string& name, const std::string& line);

  const Flags flags_;
  const Binaries bins_;
  const std::string log_dir_;
  const RunKind kind_;
  uv_loop_t loop_{};
  uv_timer_t tick_timer_{};
  uv_signal_t sigint_{}, sigterm_{};
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point start_;
  RunMonitor monitor_;
  Phase phase_ = Phase::kStarting;
  int exit_status_ = 0;
  std::string fatal_;

  std::vector<std::string> master_security_args_, peer_security_args_;  // --tls, --secret
  std::unique_ptr<ChildProcess> master_;
  bool master_restarting_ = false;  // SIGKILLed for a restart: its exit is expected
  bool master_down_ = false;        // ... and it has exited: start it again
  double next_master_restart_ms_ = -1;
  uint16_t master_port_ = 0;
  std::unique_ptr<ChildProcess> wanem_;
  uint16_t master_route_port_ = 0;
  bool wanem_ready_ = false;
  // Site name -> (namespace, address), from the lab's SITE lines; the master's is "master".
  std::map<std::string, std::pair<std::string, std::string>> site_hosts_;
  uint64_t sited_count_ = 0;
  std::deque<std::function<void(const std::string&)>> wanem_answers_;

  std::vector<std::unique_ptr<PeerProc>> peers_;
  uint64_t next_peer_ = 1;
  uint64_t routed_count_ = 0;
  std::vector<Respawn> respawns_;        // replacements waiting to start
  std::vector<std::string> live_nodes_;  // nodes with a rank still running
  uint64_t next_node_ = 1;

  std::vector<TrainSummary> train_summaries_;
  uint64_t unadmitted_ = 0;
  std::optional<TrainRun> reference_, train_result_;
  std::optional<LossComparison> loss_comparison_;
  double churn_start_ms_ = 0, churn_end_ms_ = 0, next_event_ms_ = -1, phase_deadline_ms_ = 0,
         last_status_ms_ = -1e9;
  bool status_tty_ = false;
};

}  // namespace longhaul_churn
