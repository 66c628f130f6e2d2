// One churn run on a libuv loop: starts the master (and the WAN emulator), keeps --peers
// longhaul-peer processes running, disrupts them on a seeded random schedule, feeds everything
// they print to a RunMonitor, and at the end stops everyone and reports.
//
// Phases: starting (master port, emulator READY) -> churn (for --duration) -> final (no more
// churn; every survivor must step within --grace-ms) -> leaving (SIGTERM: each must leave
// cleanly) -> done. Any fatal problem or SIGINT/SIGTERM skips to shutdown, which SIGKILLs every
// child still running (by pid) and runs the loop until all are reaped.
#pragma once

#include <uv.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "churn_flags.hpp"
#include "run_monitor.hpp"

namespace longhaul_churn {

struct Binaries {
  std::string master, peer, wanem;
};

class ChurnRun {
 public:
  ChurnRun(const Flags& flags, Binaries bins, std::string log_dir);
  ~ChurnRun();
  // Runs to the end; returns the process exit status (0 clean, 1 violations, 3 setup failure,
  // 130 interrupted).
  int run();

 private:
  enum class Phase { kStarting, kChurn, kFinal, kLeaving, kShutdown };
  struct PeerProc {
    std::string name;
    std::unique_ptr<ChildProcess> child;
    bool routed = false;
    double resume_at_ms = -1;  // a stopped peer gets SIGCONT then
    bool leaving = false;      // SIGTERMed already: a second SIGTERM would make it exit at once
  };

  double now_ms() const;
  void tick();
  void schedule_next_event();
  void disrupt();
  void start_master();
  void start_wanem();
  void start_peer();
  void launch_peer(const std::string& name, bool routed, uint16_t advertise_port);
  void on_peer_line(PeerProc& p, const std::string& line);
  void on_wanem_line(const std::string& line);
  void wanem_command(const std::string& command, std::function<void(const std::string&)> on_answer);
  void begin_final();
  void begin_leaving();
  void shutdown(int exit_status, const std::string& why);
  void print_status(bool final_line);
  void report();
  bool all_children_gone() const;
  std::string log_path(const std::string& name, const char* ext) const;
  void append_log(const std::string& name, const std::string& line);

  const Flags flags_;
  const Binaries bins_;
  const std::string log_dir_;
  uv_loop_t loop_{};
  uv_timer_t tick_timer_{};
  uv_signal_t sigint_{}, sigterm_{};
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point start_;
  RunMonitor monitor_;
  Phase phase_ = Phase::kStarting;
  int exit_status_ = 0;
  std::string fatal_;

  std::unique_ptr<ChildProcess> master_;
  uint16_t master_port_ = 0;
  std::unique_ptr<ChildProcess> wanem_;
  uint16_t master_route_port_ = 0;
  bool wanem_ready_ = false;
  std::deque<std::function<void(const std::string&)>> wanem_answers_;

  std::vector<std::unique_ptr<PeerProc>> peers_;
  uint64_t next_peer_ = 1;
  uint64_t routed_count_ = 0;
  std::vector<double> spawn_at_ms_;  // replacements waiting to start
  double churn_start_ms_ = 0, next_event_ms_ = -1, phase_deadline_ms_ = 0, last_status_ms_ = -1e9;
  bool status_tty_ = false;
};

}  // namespace longhaul_churn
