// longhaul-membership-member: one peer of the membership benchmark (bench/run membership),
// written against the public C API only.
//
// Every line it prints on stdout carries t=NS, CLOCK_MONOTONIC in nanoseconds (the clock of
// Python's time.monotonic_ns() and of every process on this machine), so the driver can put a
// signal it sent and the lines of several members on one time axis:
//   CREATED t= port=            lh_comm_create returned (the data listener is bound)
//   CONNECT t=                  just before lh_comm_connect
//   JOINED t= id= epoch= world= lh_comm_connect returned: admitted
//   EPOCH t= epoch= world=      update_topology entered a new epoch
//   ABORT t= epoch= status=     the abort callback (a pushed abort, or the session's end)
//   FORMED t= epoch= world=     --mode formation: the group reached --world members
//   ALLREDUCE t= attempts= ok=  --mode formation: the all-reduce's outcome (ok=1: correct sums)
//   REDUCED t= epoch=           --mode allreduce: an all-reduce completed with correct sums
//   LEFT t=                     graceful leave done (then exit 0)
//   ERROR what= status= message=  (then exit 1)
//
// Modes, after admission:
//   pending    poll the peers-pending flag every --poll-us and call update_topology when set
//              (a member that reacts to pushed news: the detection figures)
//   loop       call update_topology back to back, --poll-us apart (the join figure)
//   formation  wait until the group has --world members (update_topology whenever the flag is
//              set), run one f32 all-reduce (retried after update_topology on a retryable
//              error), check every element, leave gracefully and exit
//   allreduce  wait until the group has --world members, then all-reduce back to back (--poll-us
//              apart), each retried after update_topology on a retryable error, the flag
//              honoured between them (the master restart figure)
// In pending, loop and allreduce mode, a line "leave" on stdin (or its end) leaves gracefully and
// exits 0.
// --connect-on-stdin waits for a line "connect" before connecting; --start-at-ns waits for that
// CLOCK_MONOTONIC instant (so that several processes connect at the same instant).
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.h>

#include "tool_cli.hpp"

namespace {

struct Args {
  std::string master, mode = "pending", secret;
  long world = 8, poll_us = 1000, count = 65536, attempts = 5, formation_timeout_ms = 30000;
  uint64_t start_at_ns = 0;
  bool connect_on_stdin = false;
};

std::optional<int> parse_args(int argc, char** argv, Args* a) {
  CLI::App app{"One peer of the membership benchmark (bench/run membership).\n",
               "longhaul-membership-member"};
  longhaul::cli::configure(app, "");
  using longhaul::cli::add_number;
  app.add_option("--master", a->master, "the master to join")->type_name("HOST:PORT")->required();
  app.add_option("--mode", a->mode, "pending, loop or formation")
      ->type_name("M")
      ->check(longhaul::cli::one_of({"pending", "loop", "formation", "allreduce"}));
  app.add_option("--secret", a->secret, "the cluster secret (default: none)")->type_name("S");
  add_number(app, "--world", a->world, 1, 1024, "formation: members to wait for");
  add_number(app, "--poll-us", a->poll_us, 0, 1'000'000, "pause between polls or loop calls");
  add_number(app, "--count", a->count, 1, 1u << 28, "formation: f32 elements all-reduced");
  add_number(app, "--attempts", a->attempts, 1, 100, "formation: all-reduce attempts");
  add_number(app, "--formation-timeout-ms", a->formation_timeout_ms, 1, 3'600'000,
             "formation: give up waiting for the group after this");
  add_number(app, "--start-at-ns", a->start_at_ns, 0, UINT64_MAX,
             "connect at this CLOCK_MONOTONIC instant (0: at once)");
  app.add_flag("--connect-on-stdin", a->connect_on_stdin, "connect after a line 'connect'");
  return longhaul::cli::parse(app, argc, argv);
}

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// One output line: "WHAT t=NS fields". One fputs of the whole line under stdio's lock, so the
// abort callback's lines (a library thread) and the main thread's never interleave.
void emit(const std::string& what, const std::string& fields = "") {
  const std::string line =
      what + " t=" + std::to_string(now_ns()) + (fields.empty() ? "" : " " + fields) + "\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

std::string num(int64_t v) {
  return std::to_string(v);
}

[[noreturn]] void die(const char* what, lh_status s, const char* message) {
  emit("ERROR", std::string("what=") + what + " status=" + lh_status_string(s) + " message=\"" +
                    message + "\"");
  std::_Exit(1);
}

void on_abort(void*, uint64_t epoch, lh_status status, const char*) {
  emit("ABORT", "epoch=" + std::to_string(epoch) + " status=" + lh_status_string(status));
}

int64_t attr(lh_comm* c, lh_attribute a) {
  int64_t v = -1;
  lh_comm_get_attribute(c, a, &v);
  return v;
}

// update_topology, and an EPOCH line when it entered a new epoch.
void update(lh_comm* comm) {
  const int64_t before = attr(comm, LH_ATTR_EPOCH);
  if (lh_status s = lh_comm_update_topology(comm); s != LH_OK)
    die("lh_comm_update_topology", s, lh_comm_last_error(comm));
  const int64_t epoch = attr(comm, LH_ATTR_EPOCH);
  if (epoch != before)
    emit("EPOCH", "epoch=" + num(epoch) + " world=" + num(attr(comm, LH_ATTR_GROUP_WORLD_SIZE)));
}

bool peers_pending(lh_comm* comm) {
  int pending = 0;
  lh_comm_are_peers_pending(comm, &pending);
  return pending != 0;
}

void pause_us(long us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// Creates the communicator and connects when told to (stdin or the start instant).
lh_comm* create_and_connect(const Args& a) {
  lh_comm_options co;
  lh_comm_options_init(&co);
  co.master_address = a.master.c_str();
  co.listen_address = "127.0.0.1:0";
  if (!a.secret.empty()) co.secret = a.secret.c_str();
  lh_comm* comm = nullptr;
  if (lh_status s = lh_comm_create(&co, &comm); s != LH_OK)
    die("lh_comm_create", s, lh_last_error());
  lh_comm_set_abort_callback(comm, on_abort, nullptr);
  emit("CREATED", "port=" + num(attr(comm, LH_ATTR_LISTEN_PORT)));
  if (a.connect_on_stdin) {
    std::string line;
    while (std::getline(std::cin, line) && line != "connect") {
    }
    if (!std::cin) std::_Exit(0);  // the driver went away before asking
  }
  while (a.start_at_ns > now_ns())
    std::this_thread::sleep_for(std::chrono::nanoseconds(a.start_at_ns - now_ns()));
  emit("CONNECT");
  if (lh_status s = lh_comm_connect(comm); s != LH_OK)
    die("lh_comm_connect", s, lh_comm_last_error(comm));
  emit("JOINED", "id=" + num(attr(comm, LH_ATTR_PEER_ID)) +
                     " epoch=" + num(attr(comm, LH_ATTR_EPOCH)) +
                     " world=" + num(attr(comm, LH_ATTR_GROUP_WORLD_SIZE)));
  return comm;
}

int leave(lh_comm* comm) {
  if (lh_status s = lh_comm_leave(comm, "benchmark member done"); s != LH_OK)
    die("lh_comm_leave", s, lh_comm_last_error(comm));
  emit("LEFT");
  lh_comm_destroy(comm);
  return 0;
}

bool allreduce_once(lh_comm* comm, const Args& a, long* attempts);
void wait_for_world(lh_comm* comm, const Args& a);

// pending / loop / allreduce mode until "leave" or the end of stdin.
int serve(lh_comm* comm, const Args& a) {
  std::atomic<bool> stop{false};
  std::thread([&stop] {
    std::string line;
    while (std::getline(std::cin, line) && line != "leave") {
    }
    stop = true;
  }).detach();
  const bool loop = a.mode == "loop";
  if (a.mode == "allreduce") wait_for_world(comm, a);
  while (!stop) {
    if (loop || peers_pending(comm)) update(comm);
    if (a.mode == "allreduce") {
      long attempts = 0;
      if (!allreduce_once(comm, a, &attempts)) die("lh_allreduce", LH_ERR_INTERNAL, "wrong sums");
      emit("REDUCED", "epoch=" + num(attr(comm, LH_ATTR_EPOCH)));
    }
    pause_us(a.poll_us);
  }
  return leave(comm);
}

// One all-reduce of `count` f32 (element i of every member is i % 1000), retried after
// update_topology on a retryable error; true when every element came back as world x (i % 1000).
bool allreduce_once(lh_comm* comm, const Args& a, long* attempts) {
  std::vector<float> data(static_cast<size_t>(a.count));
  lh_allreduce_options ro;
  lh_allreduce_options_init(&ro);
  for (*attempts = 1;; ++*attempts) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 1000);
    lh_status s = lh_allreduce(comm, data.data(), data.data(), data.size(), LH_DTYPE_F32, LH_OP_SUM,
                               &ro, nullptr);
    if (s == LH_OK) break;
    if ((s != LH_ERR_PEER_LOST && s != LH_ERR_ABORTED) || *attempts >= a.attempts)
      die("lh_allreduce", s, lh_comm_last_error(comm));
    update(comm);
  }
  const float world = static_cast<float>(attr(comm, LH_ATTR_GROUP_WORLD_SIZE));
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != world * static_cast<float>(i % 1000)) return false;
  return world == static_cast<float>(a.world);
}

void wait_for_world(lh_comm* comm, const Args& a) {
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(a.formation_timeout_ms) * 1'000'000;
  update(comm);  // the round right after connect: admits whoever registered meanwhile
  while (attr(comm, LH_ATTR_GROUP_WORLD_SIZE) < a.world) {
    if (now_ns() > deadline) die("formation", LH_ERR_TIMEOUT, "the group did not reach --world");
    if (peers_pending(comm))
      update(comm);
    else
      pause_us(a.poll_us);
  }
}

int formation(lh_comm* comm, const Args& a) {
  wait_for_world(comm, a);
  emit("FORMED", "epoch=" + num(attr(comm, LH_ATTR_EPOCH)) +
                     " world=" + num(attr(comm, LH_ATTR_GROUP_WORLD_SIZE)));
  long attempts = 0;
  const bool ok = allreduce_once(comm, a, &attempts);
  emit("ALLREDUCE", "attempts=" + num(attempts) + " ok=" + (ok ? "1" : "0"));
  if (!ok) die("lh_allreduce", LH_ERR_INTERNAL, "wrong sums");
  return leave(comm);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto exit_status = parse_args(argc, argv, &a)) return *exit_status;
  lh_comm* comm = create_and_connect(a);
  return a.mode == "formation" ? formation(comm, a) : serve(comm, a);
}
