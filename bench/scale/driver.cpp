// longhaul-scale-driver: many communicators in one process, for bench/run scale (bench/e2e/scale).
// A 2-core machine cannot run hundreds of peer processes, but it can run hundreds of communicators
// in a few: each is a full peer (its own control link to the master, data listener, ring links,
// I/O thread) written against the public C API only, with K = 1 and tiny payloads so that the
// master's control plane is what the benchmark measures.
//
// The benchmark script drives it with one command per stdin line; each command is answered with
// one stdout line once every communicator of the process is done (times are CLOCK_MONOTONIC ns):
//   connect AT_NS        every communicator connects at AT_NS  -> CONNECTED t=<last return>
//   await WORLD MS       until every one is in one epoch with WORLD members
//                                                  -> WORLD t=<last to enter it> epoch= world=
//   mark                 forget the aborts seen so far                  -> MARKED
//   aborts MS            until every one saw a PEER_LOST abort -> ABORTS t=<last> first=<first>
//   sync AT_NS           lh_sync_state at AT_NS       -> SYNCED t=<last> revision= rx_bytes=
//   allreduce            one tiny f32 all-reduce, checked   -> ALLREDUCE t=<last> ok=0|1
//   vanish               destroy every communicator without leaving     -> VANISHED t=<before>
//   leave                leave gracefully, then exit                    -> LEFT t=
//   stats                the process's threads and file descriptors now -> STATS threads= fds=
// A failure answers "ERROR what=..." instead. On start: READY t= comms= threads= fds= fd_limit=.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <latch>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm_worker.hpp"
#include "tool_cli.hpp"

namespace longhaul::bench {
namespace {

struct Args {
  WorkerOptions worker;
  long comms = 64, poll_us = 1000;
};

std::optional<int> parse_args(int argc, char** argv, Args* a) {
  CLI::App app{"Many communicators in one process, driven over stdin (bench/run scale).\n",
               "longhaul-scale-driver"};
  cli::configure(app, "");
  app.add_option("--master", a->worker.master, "the master to join")
      ->type_name("HOST:PORT")
      ->required();
  cli::add_number(app, "--comms", a->comms, 1, 4096, "communicators in this process");
  cli::add_number(app, "--poll-us", a->poll_us, 100, 1'000'000,
                  "how often the peers-pending flags are read");
  cli::add_number(app, "--io-threads", a->worker.io_threads, 1, 64, "I/O threads per communicator");
  cli::add_number(app, "--state-floats", a->worker.state_floats, 1, 1u << 24,
                  "floats of each communicator's shared-state tensor");
  cli::add_number(app, "--allreduce-floats", a->worker.allreduce_floats, 1, 1u << 24,
                  "floats of the tiny all-reduce");
  return cli::parse(app, argc, argv);
}

void answer(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// Each communicator holds a control socket, a listener, its ring links and its runtime's
// descriptors: hundreds of them outgrow a soft limit of 1024 that the hard limit allows to raise.
uint64_t raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  getrlimit(RLIMIT_NOFILE, &r);
  return static_cast<uint64_t>(r.rlim_cur);
}

long threads_now() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stol(line.substr(8));
  return -1;
}

long fds_now() {
  std::error_code ec;
  long n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

class Driver {
 public:
  Driver(const Args& a, std::vector<std::unique_ptr<CommWorker>> workers)
      : args_(a), workers_(std::move(workers)), poller_([this] { poll(); }) {}
  ~Driver() {
    stop_ = true;
    poller_.join();
  }
  // Runs one command line; false when the process should exit.
  bool run(const std::string& line);

 private:
  void poll() {
    while (!stop_) {
      for (auto& w : workers_) w->serve_if_pending();
      std::this_thread::sleep_for(std::chrono::microseconds(args_.poll_us));
    }
  }
  // Runs `task` on every worker and waits for all; the first failure, or "".
  std::string on_all(const std::function<void(CommWorker&)>& task);
  // Polls `done` every millisecond until it holds, a worker failed, or `ms` passed.
  std::string wait_until(const std::function<bool()>& done, long ms) const;
  std::string first_error() const;
  uint64_t max_of(uint64_t (CommWorker::*field)() const) const;
  uint64_t min_of(uint64_t (CommWorker::*field)() const) const;
  std::string await_world(long world, long ms) const;

  const Args args_;
  std::vector<std::unique_ptr<CommWorker>> workers_;
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

std::string Driver::on_all(const std::function<void(CommWorker&)>& task) {
  std::latch done(static_cast<std::ptrdiff_t>(workers_.size()));
  for (auto& w : workers_)
    w->post([&task, &done, w = w.get()] {
      task(*w);
      done.count_down();
    });
  done.wait();
  return first_error();
}

std::string Driver::first_error() const {
  for (const auto& w : workers_)
    if (std::string e = w->error(); !e.empty()) return e;
  return "";
}

std::string Driver::wait_until(const std::function<bool()>& done, long ms) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::string e = first_error(); !e.empty()) return e;
    if (std::chrono::steady_clock::now() > deadline) return "timed out";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return "";
}

uint64_t Driver::max_of(uint64_t (CommWorker::*field)() const) const {
  uint64_t v = 0;
  for (const auto& w : workers_) v = std::max(v, ((*w).*field)());
  return v;
}

uint64_t Driver::min_of(uint64_t (CommWorker::*field)() const) const {
  uint64_t v = UINT64_MAX;
  for (const auto& w : workers_) v = std::min(v, ((*w).*field)());
  return v;
}

std::string Driver::await_world(long world, long ms) const {
  int64_t epoch = 0;
  const std::string e = wait_until(
      [&] {
        epoch = workers_.front()->epoch();
        for (const auto& w : workers_)
          if (w->epoch() != epoch || w->world() != world) return false;
        return true;
      },
      ms);
  if (!e.empty()) return "ERROR what=\"await " + std::to_string(world) + ": " + e + "\"";
  return "WORLD t=" + std::to_string(max_of(&CommWorker::epoch_entered_ns)) +
         " epoch=" + std::to_string(epoch) + " world=" + std::to_string(world);
}

bool Driver::run(const std::string& line) {
  std::istringstream in(line);
  std::string cmd;
  uint64_t n = 0;
  in >> cmd >> n;
  long ms = 0;
  in >> ms;
  const auto failed = [](const std::string& e) { return "ERROR what=\"" + e + "\""; };
  std::string e;
  if (cmd == "connect") {
    e = on_all([n](CommWorker& w) { w.connect_at(n); });
    answer(e.empty() ? "CONNECTED t=" + std::to_string(max_of(&CommWorker::task_done_ns))
                     : failed(e));
  } else if (cmd == "await") {
    answer(await_world(static_cast<long>(n), ms));
  } else if (cmd == "stats") {
    answer("STATS threads=" + std::to_string(threads_now()) + " fds=" + std::to_string(fds_now()));
  } else if (cmd == "mark") {
    for (auto& w : workers_) w->reset_abort();
    answer("MARKED");
  } else if (cmd == "aborts") {
    e = wait_until([this] { return min_of(&CommWorker::lost_abort_ns) != 0; },
                   static_cast<long>(n));
    answer(e.empty() ? "ABORTS t=" + std::to_string(max_of(&CommWorker::lost_abort_ns)) +
                           " first=" + std::to_string(min_of(&CommWorker::lost_abort_ns))
                     : failed("aborts: " + e));
  } else if (cmd == "sync") {
    e = on_all([n](CommWorker& w) {
      while (n > now_ns()) std::this_thread::sleep_for(std::chrono::nanoseconds(n - now_ns()));
      w.sync_state();
    });
    uint64_t rx = 0;
    for (const auto& w : workers_) rx += w->state_rx_bytes();
    answer(e.empty() ? "SYNCED t=" + std::to_string(max_of(&CommWorker::task_done_ns)) +
                           " revision=" + std::to_string(max_of(&CommWorker::revision)) +
                           " rx_bytes=" + std::to_string(rx)
                     : failed(e));
  } else if (cmd == "allreduce") {
    e = on_all([](CommWorker& w) { w.allreduce(); });
    bool ok = e.empty();
    for (const auto& w : workers_) ok = ok && w->allreduce_ok();
    answer(e.empty() ? "ALLREDUCE t=" + std::to_string(max_of(&CommWorker::task_done_ns)) +
                           " ok=" + (ok ? "1" : "0")
                     : failed(e));
  } else if (cmd == "vanish") {
    answer("VANISHED t=" + std::to_string(now_ns()));
    on_all([](CommWorker& w) { w.vanish(); });
  } else if (cmd == "leave") {
    e = on_all([](CommWorker& w) { w.leave(); });
    answer(e.empty() ? "LEFT t=" + std::to_string(now_ns()) : failed(e));
    return false;
  } else {
    answer(failed("unknown command: " + line));
  }
  return true;
}

int run_driver(const Args& a) {
  const uint64_t fd_limit = raise_fd_limit();
  const long threads_before = threads_now();
  std::vector<std::unique_ptr<CommWorker>> workers;
  for (long i = 0; i < a.comms; ++i) {
    std::unique_ptr<CommWorker> w;
    std::string error;
    if (CommWorker::create(a.worker, &w, &error) != LH_OK) {
      answer("ERROR what=\"" + error + "\"");
      return 1;
    }
    workers.push_back(std::move(w));
  }
  Driver driver(a, std::move(workers));
  answer("READY t=" + std::to_string(now_ns()) + " comms=" + std::to_string(a.comms) + " threads=" +
         std::to_string(threads_now()) + " threads_before=" + std::to_string(threads_before) +
         " fds=" + std::to_string(fds_now()) + " fd_limit=" + std::to_string(fd_limit));
  for (std::string line; std::getline(std::cin, line);)
    if (!driver.run(line)) return 0;
  return 0;  // the script went away: end (abruptly, as the destructors destroy without leaving)
}

}  // namespace
}  // namespace longhaul::bench

int main(int argc, char** argv) {
  longhaul::bench::Args a;
  if (auto exit_status = longhaul::bench::parse_args(argc, argv, &a)) return *exit_status;
  return longhaul::bench::run_driver(a);
}
