#include "churn_run.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "churn_summary.hpp"
#include "peer_command.hpp"

namespace longhaul_churn {

namespace {

constexpr double kTickMs = 100;
constexpr double kLeaveTimeoutMs = 15000;
constexpr double kStartTimeoutMs = 15000;

}  // namespace

std::string fmt_seconds(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", ms / 1000.0);
  return buf;
}

ChurnRun::ChurnRun(const Flags& flags, Binaries bins, std::string log_dir, RunKind kind)
    : flags_(flags),
      bins_(std::move(bins)),
      log_dir_(std::move(log_dir)),
      kind_(kind),
      rng_(flags.seed),
      start_(std::chrono::steady_clock::now()),
      monitor_(MonitorLimits{
          static_cast<double>(flags.hang_ms), static_cast<double>(flags.join_ms),
          static_cast<double>(flags.heartbeat_interval_ms) * flags.heartbeat_misses,
          ProgressLimits{static_cast<double>(flags.hang_ms),
                         static_cast<double>(flags.max_no_round_ms), flags.min_loss_drop}}) {
  uv_loop_init(&loop_);
  status_tty_ = ::isatty(STDERR_FILENO) != 0;
}

ChurnRun::~ChurnRun() {
  uv_loop_close(&loop_);
}

double ChurnRun::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
      .count();
}

std::string ChurnRun::log_path(const std::string& name, const char* ext) const {
  return log_dir_ + "/" + name + ext;
}

void ChurnRun::append_log(const std::string& name, const std::string& line) {
  std::ofstream out(log_path(name, ".out"), std::ios::app);
  out << "[" << fmt_seconds(now_ms()) << "] " << line << "\n";
}

int ChurnRun::execute() {
  uv_timer_init(&loop_, &tick_timer_);
  tick_timer_.data = this;
  uv_timer_start(
      &tick_timer_, [](uv_timer_t* t) { static_cast<ChurnRun*>(t->data)->tick(); },
      static_cast<uint64_t>(kTickMs), static_cast<uint64_t>(kTickMs));
  for (auto [sig, handle] : {std::pair{SIGINT, &sigint_}, std::pair{SIGTERM, &sigterm_}}) {
    uv_signal_init(&loop_, handle);
    handle->data = this;
    uv_signal_start(
        handle,
        [](uv_signal_t* h, int signum) {
          static_cast<ChurnRun*>(h->data)->shutdown(
              130, signum == SIGINT ? "interrupted (SIGINT)" : "interrupted (SIGTERM)");
        },
        sig);
  }
  if (prepare_security()) sites() ? start_lab() : start_master();
  uv_run(&loop_, UV_RUN_DEFAULT);
  return exit_status_;
}

int ChurnRun::report_run() {
  if (kind_ == RunKind::kReference)
    report_reference();
  else
    report();
  return exit_status_;
}

void ChurnRun::start_master() {
  const std::string port_file = log_dir_ + "/master.port";
  // In the packet lab the master runs in its own site (the lab printed it before READY).
  const bool in_lab = sites() && site_hosts_.count("master") > 0;
  std::vector<std::string> argv;
  if (in_lab) argv = {"ip", "netns", "exec", site_hosts_["master"].first};
  // A restarted master listens where its predecessor did: the peers reconnect there.
  const std::string listen =
      (in_lab ? site_hosts_["master"].second : "127.0.0.1") + ":" + std::to_string(master_port_);
  for (const std::string& a : {bins_.master, std::string("--listen"), listen}) argv.push_back(a);
  argv.insert(argv.end(), {"--port-file", port_file, "--log-level", "info",
                           "--heartbeat-interval-ms", std::to_string(flags_.heartbeat_interval_ms),
                           "--heartbeat-misses", std::to_string(flags_.heartbeat_misses)});
  argv.insert(argv.end(), master_security_args_.begin(), master_security_args_.end());
  if (flags_.master_restart_ms > 0) {
    argv.push_back("--journal");
    argv.push_back(log_dir_ + "/master.journal");
  }
  std::string error;
  master_ = ChildProcess::spawn(
      &loop_, argv, log_path("master", ".err"), false, [](const std::string&) {},
      [this](int64_t status, int sig) {
        if (master_restarting_) {
          master_down_ = true;  // started again from tick(), outside this callback
        } else if (phase_ != Phase::kShutdown) {
          monitor_.on_infrastructure_exit("the master", status, sig, now_ms());
          shutdown(1, "the master exited");
        }
      },
      &error);
  if (!master_) {
    shutdown(3, error);
    return;
  }
  append_log("master", "started pid " + std::to_string(master_->pid()));
  if (phase_ == Phase::kStarting) phase_deadline_ms_ = now_ms() + kStartTimeoutMs;
}

void ChurnRun::start_wanem() {
  std::vector<std::string> argv = {bins_.wanem,
                                   "--seed",
                                   std::to_string(flags_.seed),
                                   "--latency-ms",
                                   std::to_string(flags_.latency_ms),
                                   "--jitter-ms",
                                   std::to_string(flags_.jitter_ms),
                                   "--log-level",
                                   "info",
                                   "--route",
                                   "master=127.0.0.1:0>127.0.0.1:" + std::to_string(master_port_)};
  if (flags_.rate_mbit > 0) {
    argv.push_back("--rate-mbit");
    argv.push_back(std::to_string(flags_.rate_mbit));
  }
  std::string error;
  wanem_ = ChildProcess::spawn(
      &loop_, argv, log_path("wanem", ".err"), true,
      [this](const std::string& line) { on_wanem_line(line); },
      [this](int64_t status, int sig) {
        if (phase_ != Phase::kShutdown) {
          monitor_.on_infrastructure_exit("longhaul-wanem", status, sig, now_ms());
          shutdown(1, "longhaul-wanem exited");
        }
      },
      &error);
  if (!wanem_) {
    shutdown(3, error);
    return;
  }
  append_log("wanem", "started pid " + std::to_string(wanem_->pid()));
}

void ChurnRun::on_wanem_line(const std::string& line) {
  append_log("wanem", line);
  if (sites()) {
    on_site_line(line);
    return;
  }
  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word == "ROUTE") {
    std::string name;
    in >> name >> master_route_port_;
  } else if (word == "READY") {
    wanem_ready_ = true;
  } else if ((word == "OK" || word == "ERR") && !wanem_answers_.empty()) {
    auto answer = std::move(wanem_answers_.front());
    wanem_answers_.pop_front();
    if (word == "ERR") {
      shutdown(3, "longhaul-wanem refused a command: " + line);
      return;
    }
    answer(line);
  }
}

void ChurnRun::wanem_command(const std::string& command,
                             std::function<void(const std::string&)> on_answer) {
  append_log("wanem", "> " + command);
  wanem_answers_.push_back(std::move(on_answer));
  wanem_->write_line(command);
}

void ChurnRun::start_peer(int shard, bool join, const std::string& node, uint32_t rail) {
  const std::string name =
      node.empty() ? "p" + std::to_string(next_peer_) : node + ".r" + std::to_string(rail);
  ++next_peer_;
  // Route the fraction asked for, spread evenly over the peers as they start.
  const bool routed =
      wanem_ && static_cast<double>(routed_count_ + 1) <=
                    flags_.wanem_fraction * static_cast<double>(next_peer_ - 1) + 1e-9;
  if (!routed) {
    launch_peer(name, false, 0, shard, join, node, rail);
    return;
  }
  ++routed_count_;
  wanem_command("route " + name + " 127.0.0.1:0 -",
                [this, name, shard, join, node, rail](const std::string& answer) {
                  // OK ROUTE NAME PORT
                  std::istringstream in(answer);
                  std::string ok, route, n;
                  uint16_t port = 0;
                  in >> ok >> route >> n >> port;
                  launch_peer(name, true, port, shard, join, node, rail);
                });
}

void ChurnRun::launch_peer(const std::string& name, bool routed, uint16_t advertise_port, int shard,
                           bool join, const std::string& node, uint32_t rail) {
  if (phase_ == Phase::kShutdown) return;
  auto proc = std::make_unique<PeerProc>();
  proc->name = name;
  proc->routed = routed;
  proc->shard = shard;
  proc->node = node;
  proc->rail = rail;
  PeerLaunch launch;
  launch.binary = train() ? bins_.train : bins_.peer;
  launch.master_port = routed ? master_route_port_ : master_port_;
  launch.advertise_port = routed ? advertise_port : 0;
  launch.shard = shard;
  launch.join = join;
  launch.out_dir = log_path(name, "");
  launch.node = node;
  launch.rail = rail;
  launch.security = peer_security_args_;
  PeerPlace place;
  if (sites()) {
    const auto& [netns, address] = next_peer_site();
    place = {site_hosts_["master"].second, address, netns};
  }
  const std::vector<std::string> argv = peer_command(flags_, launch, place);
  PeerProc* raw = proc.get();
  std::string error;
  proc->child = ChildProcess::spawn(
      &loop_, argv, log_path(name, ".err"), false,
      [this, raw](const std::string& line) { on_peer_line(*raw, line); },
      [this, raw](int64_t status, int sig) {
        append_log(raw->name, "exited: " + (status < 0 ? "signal " + std::to_string(sig)
                                                       : "status " + std::to_string(status)));
        monitor_.on_exit(raw->name, status, sig, now_ms());
        if (!raw->node.empty())
          on_rank_exit(*raw);
        else if (phase_ == Phase::kChurn)
          respawns_.push_back({now_ms() + flags_.rejoin_delay_ms, raw->shard});
      },
      &error);
  if (!proc->child) {
    shutdown(3, error);
    return;
  }
  append_log(name,
             "started pid " + std::to_string(proc->child->pid()) +
                 (routed ? " (through longhaul-wanem)" : "") +
                 (train() ? " shard " + std::to_string(shard) + (join ? " (joins)" : "") : ""));
  monitor_.on_spawn(name, now_ms(), rail, !node.empty());
  peers_.push_back(std::move(proc));
}

void ChurnRun::on_peer_line(PeerProc& p, const std::string& line) {
  append_log(p.name, line);
  if (train()) {
    if (auto summary = parse_train_summary(p.name, line)) {
      on_train_summary(p, *summary);
      return;
    }
  }
  monitor_.on_line(p.name, line, now_ms());
  if (p.routed && line.rfind("LISTEN ", 0) == 0) {
    const auto f = parse_fields(line);
    wanem_command("target " + p.name + " 127.0.0.1:" + f.at("port"), [](const std::string&) {});
  }
}

double ChurnRun::jittered_deadline(uint32_t mean_ms) {
  if (mean_ms == 0) return -1;
  std::uniform_real_distribution<double> d(0.5, 1.5);
  return now_ms() + d(rng_) * mean_ms;
}

void ChurnRun::schedule_next_event() {
  next_event_ms_ = jittered_deadline(flags_.kill_interval_ms);
}

// The master's port (and the emulator's READY), then the first peers.
void ChurnRun::tick_starting(double now) {
  if (master_port_ == 0) {
    std::ifstream in(log_dir_ + "/master.port");
    unsigned port = 0;
    if (in >> port) {
      master_port_ = static_cast<uint16_t>(port);
      if (flags_.wanem_fraction > 0) start_wanem();
    }
  }
  const bool ready = master_port_ != 0 && (flags_.wanem_fraction == 0 || wanem_ready_);
  if (ready) {
    phase_ = Phase::kChurn;
    churn_start_ms_ = now;
    if (nodes())
      for (uint32_t i = 0; i < flags_.nodes; ++i) start_node();
    else
      for (uint32_t i = 0; i < flags_.peers; ++i) start_peer(static_cast<int>(i), false);
    schedule_next_event();
    schedule_master_restart();
    // Give the first peers time to join before the churn starts.
    next_event_ms_ =
        flags_.kill_interval_ms == 0 ? -1 : now + std::max<double>(flags_.kill_interval_ms, 2000);
  } else if (now > phase_deadline_ms_) {
    shutdown(3, sites() && !master_ ? "the packet lab did not get ready"
                : master_port_ == 0 ? "the master did not report its port"
                                    : "longhaul-wanem did not get ready");
  }
}

// The end of the churn; a disruption when one is due; replacements whose time has come.
void ChurnRun::tick_churn(double now) {
  // The train workload's last tenth of the steps is calm: replacements already started are
  // admitted before the group finishes (one whose predecessor went just before is not started).
  const bool calm = train() && static_cast<double>(monitor_.group_steps()) >=
                                   0.9 * static_cast<double>(flags_.train_steps);
  if (now - churn_start_ms_ >= flags_.duration_s * 1000 || calm) {
    begin_final();
    return;
  }
  if (next_event_ms_ >= 0 && now >= next_event_ms_) {
    disrupt();
    schedule_next_event();
  }
  tick_master_restart(now);
  for (auto it = respawns_.begin(); it != respawns_.end();) {
    if (now >= it->at_ms) {
      const int shard = it->shard;
      const bool node = it->node;
      it = respawns_.erase(it);
      if (node && live_nodes_.size() < flags_.nodes)
        start_node();
      else if (!node && monitor_.running() < flags_.peers)
        start_peer(shard, train());
    } else {
      ++it;
    }
  }
}

void ChurnRun::tick() {
  const double now = now_ms();
  if (master_restarting_ && master_down_ && phase_ != Phase::kShutdown) bring_master_back();
  switch (phase_) {
    case Phase::kStarting:
      tick_starting(now);
      break;
    case Phase::kChurn:
      tick_churn(now);
      break;
    case Phase::kFinal: {
      if (train()) {
        tick_train_final(now);
        if (phase_ == Phase::kShutdown) return;
      } else if (monitor_.peers_without_final_step().empty()) {
        begin_leaving();
      } else if (now > phase_deadline_ms_) {
        for (const auto& name : monitor_.peers_without_final_step())
          monitor_.add_violation(
              now, name +
                       " completed no step within --grace-ms after the churn ended; last lines:\n" +
                       monitor_.tail(name));
        begin_leaving();
      }
      break;
    }
    case Phase::kLeaving: {
      if (std::none_of(peers_.begin(), peers_.end(),
                       [](const auto& p) { return p->child->running(); })) {
        shutdown(monitor_.violations().empty() ? 0 : 1, "");
      } else if (now > phase_deadline_ms_) {
        for (const auto& p : peers_)
          if (p->child->running())
            monitor_.add_violation(now, p->name + " did not leave within 15 s of SIGTERM");
        shutdown(1, "");
      }
      break;
    }
    case Phase::kShutdown:
      if (all_children_gone()) {
        uv_timer_stop(&tick_timer_);
        uv_close(reinterpret_cast<uv_handle_t*>(&tick_timer_), nullptr);
        uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
        uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
        print_status(true);
      }
      return;
  }
  heal_links(now);
  // Stopped peers whose time is up resume (also when the churn has ended).
  for (auto& p : peers_) {
    if (p->resume_at_ms >= 0 && (now >= p->resume_at_ms || phase_ != Phase::kChurn)) {
      p->resume_at_ms = -1;
      append_log(p->name, "churn: SIGCONT");
      p->child->send_signal(SIGCONT);
      monitor_.on_cont(p->name, now);
    }
  }
  if (phase_ == Phase::kChurn || phase_ == Phase::kFinal) monitor_.check_progress(now);
  if (!monitor_.violations().empty() && phase_ != Phase::kShutdown && phase_ != Phase::kLeaving) {
    // One violation is enough to fail; stop now so the logs end close to it.
    shutdown(1, "violation");
    return;
  }
  print_status(false);
}

void ChurnRun::begin_final() {
  phase_ = Phase::kFinal;
  churn_end_ms_ = now_ms();
  respawns_.clear();
  const double now = now_ms();
  for (auto& p : peers_) {
    if (p->resume_at_ms >= 0) {
      p->resume_at_ms = -1;
      append_log(p->name, "churn: SIGCONT (churn over)");
      p->child->send_signal(SIGCONT);
      monitor_.on_cont(p->name, now);
    }
  }
  monitor_.begin_final(now);
  phase_deadline_ms_ = now + flags_.grace_ms;
}

void ChurnRun::begin_leaving() {
  phase_ = Phase::kLeaving;
  const double now = now_ms();
  // Every survivor has stepped since the churn ended: the group's progress is judged here, before
  // the leaves stop it.
  monitor_.finish_progress(now);
  for (auto& p : peers_) {
    // A peer still leaving from a churn SIGTERM (slow under a sanitizer) is not signalled again:
    // longhaul-peer treats a second stop signal as "exit now" (status 128 + signal).
    if (!p->child->running() || p->leaving) continue;
    append_log(p->name, "end of run: SIGTERM");
    monitor_.on_term(p->name, now);
    p->child->send_signal(SIGTERM);
  }
  phase_deadline_ms_ = now + kLeaveTimeoutMs;
}

void ChurnRun::shutdown(int exit_status, const std::string& why) {
  if (phase_ == Phase::kShutdown) return;
  phase_ = Phase::kShutdown;
  exit_status_ = exit_status;
  fatal_ = why;
  // Every child we started, by its own pid; a stopped one dies of SIGKILL too.
  monitor_.on_shutdown();
  for (auto& p : peers_) p->child->send_signal(SIGKILL);
  // The packet lab removes its namespaces on SIGTERM; SIGKILL would leave them behind.
  if (wanem_) wanem_->send_signal(sites() ? SIGTERM : SIGKILL);
  if (master_) master_->send_signal(exit_status == 0 ? SIGTERM : SIGKILL);
  if (all_children_gone()) tick();
}

bool ChurnRun::all_children_gone() const {
  if (master_ && master_->running()) return false;
  if (wanem_ && wanem_->running()) return false;
  return std::none_of(peers_.begin(), peers_.end(),
                      [](const auto& p) { return p->child->running(); });
}

}  // namespace longhaul_churn
