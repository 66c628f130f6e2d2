// A peer process for the integration tests, written against the C API only.
//
// It connects, then loops: when the master says peers are pending it calls update_topology. It
// reports on stdout, one line per event:
//   LISTEN <port>       (its data listener, before it connects)
//   ID <peer id>
//   EPOCH <e> WORLD <n> GROUPS <g> GROUP_WORLD <m> RANK <r> ABORTS <a> RING <id,id,...>
//   UPDATE <e>          (entering update_topology from epoch e)
//   ABORT <epoch> <status> <reason>   (from the abort callback: a pushed abort or the session's
//   end) PAUSED / RESUMED / LEFT ERROR <status> <message>   (then exits with status 3)
// and obeys commands on stdin, one per line: pause (stop calling update_topology), resume, leave
// (graceful leave, then exit 0), exit (destroy without leaving, exit 0). End of input means exit.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "longhaul/longhaul.h"

namespace {

std::mutex g_mu;
std::deque<std::string> g_commands;

void read_commands() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::lock_guard lock(g_mu);
    g_commands.push_back(line);
  }
  std::lock_guard lock(g_mu);
  g_commands.push_back("exit");
}

bool next_command(std::string* out) {
  std::lock_guard lock(g_mu);
  if (g_commands.empty()) return false;
  *out = g_commands.front();
  g_commands.pop_front();
  return true;
}

[[noreturn]] void die(lh_status s, const char* message) {
  std::printf("ERROR %s %s\n", lh_status_string(s), message);
  std::fflush(stdout);
  std::_Exit(3);
}

void on_abort(void*, uint64_t epoch, lh_status status, const char* reason) {
  std::printf("ABORT %llu %s %s\n", static_cast<unsigned long long>(epoch),
              lh_status_string(status), reason);
  std::fflush(stdout);
}

int64_t attr(lh_comm* c, lh_attribute a) {
  int64_t v = -1;
  lh_comm_get_attribute(c, a, &v);
  return v;
}

void print_epoch(lh_comm* c) {
  size_t n = 0;
  lh_comm_get_ring(c, nullptr, 0, &n);
  std::vector<uint64_t> ring(n);
  lh_comm_get_ring(c, ring.data(), ring.size(), &n);
  std::string ids;
  for (size_t i = 0; i < n; ++i) ids += (i ? "," : "") + std::to_string(ring[i]);
  std::printf("EPOCH %lld WORLD %lld GROUPS %lld GROUP_WORLD %lld RANK %lld ABORTS %lld RING %s\n",
              static_cast<long long>(attr(c, LH_ATTR_EPOCH)),
              static_cast<long long>(attr(c, LH_ATTR_WORLD_SIZE)),
              static_cast<long long>(attr(c, LH_ATTR_GROUP_COUNT)),
              static_cast<long long>(attr(c, LH_ATTR_GROUP_WORLD_SIZE)),
              static_cast<long long>(attr(c, LH_ATTR_RANK)),
              static_cast<long long>(attr(c, LH_ATTR_ABORT_COUNT)), ids.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  lh_comm_options options;
  lh_comm_options_init(&options);
  options.listen_address = "127.0.0.1:0";
  std::string secret;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--master")
      options.master_address = value;
    else if (flag == "--group")
      options.peer_group = static_cast<uint32_t>(std::atoi(value));
    else if (flag == "--secret")
      options.secret = value;
    else if (flag == "--connections")
      options.connections_per_link = static_cast<uint32_t>(std::atoi(value));
    else if (flag == "--connect-timeout-ms")
      options.connect_timeout_ms = static_cast<uint32_t>(std::atoi(value));
    else if (flag == "--link-timeout-ms")
      options.link_timeout_ms = static_cast<uint32_t>(std::atoi(value));
    else if (flag == "--advertise")
      options.advertised_address = value;
    else if (flag == "--node")
      options.node = value;
    else if (flag == "--rail")
      options.node_rail = static_cast<uint32_t>(std::atoi(value));
    else if (flag == "--rails")
      options.node_rails = static_cast<uint32_t>(std::atoi(value));
    else if (flag == "--tls-cert") {
      options.use_tls = 1;
      options.tls_cert_file = value;
    } else if (flag == "--tls-key") {
      options.use_tls = 1;
      options.tls_key_file = value;
    } else {
      std::fprintf(stderr, "test_peer: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::thread(read_commands).detach();

  lh_comm* comm = nullptr;
  lh_status s = lh_comm_create(&options, &comm);
  if (s != LH_OK) die(s, lh_last_error());
  lh_comm_set_abort_callback(comm, on_abort, nullptr);
  // Before connecting: a test can point a WAN-emulator route at this port (the address the peer
  // advertises) while the peer waits for admission.
  std::printf("LISTEN %lld\n", static_cast<long long>(attr(comm, LH_ATTR_LISTEN_PORT)));
  std::fflush(stdout);
  s = lh_comm_connect(comm);
  if (s != LH_OK) die(s, lh_comm_last_error(comm));
  std::printf("ID %lld\n", static_cast<long long>(attr(comm, LH_ATTR_PEER_ID)));
  print_epoch(comm);

  bool paused = false;
  for (;;) {
    std::string cmd;
    while (next_command(&cmd)) {
      if (cmd == "pause") {
        paused = true;
        std::printf("PAUSED\n");
      } else if (cmd == "resume") {
        paused = false;
        std::printf("RESUMED\n");
      } else if (cmd == "leave") {
        s = lh_comm_leave(comm, "asked to leave by the test");
        if (s != LH_OK) die(s, lh_comm_last_error(comm));
        std::printf("LEFT\n");
        std::fflush(stdout);
        lh_comm_destroy(comm);
        return 0;
      } else if (cmd == "exit") {
        lh_comm_destroy(comm);
        return 0;
      }
      std::fflush(stdout);
    }
    int pending = 0;
    lh_comm_are_peers_pending(comm, &pending);
    if (!paused && pending) {
      std::printf("UPDATE %lld\n", static_cast<long long>(attr(comm, LH_ATTR_EPOCH)));
      std::fflush(stdout);
      s = lh_comm_update_topology(comm);
      if (s != LH_OK) die(s, lh_comm_last_error(comm));
      print_epoch(comm);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}
