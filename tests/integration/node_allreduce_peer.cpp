// One rank of a node for the node-local group tests (C API only): forms its node's local group,
// connects, then runs hierarchical all-reduces (lh_node_allreduce) step after step and checks
// each result exactly.
//
// Rank `rail` of node number k contributes input[i] = (k + 1) * (rail + 1) * (i % 13 + 1) + step,
// small integers that f32 sums exactly in any order. So every result is
//   result[i] = (i % 13 + 1) * C + world * rails * step,  C = (sum of k + 1 over the nodes) *
//   (1 + 2 + ... + rails),
// which the rank checks on every element. It prints, one line per event:
//   STEP step=<s> world=<nodes> c=<C> hash=<xxh of the result bytes, hex>
//   RETRY <status> <message>        (a failed attempt: update_topology, then the same step again)
//   ERROR status=<status> <message> (then exits 3; 4 for LH_ERR_NODE_EVICTED)
//   MISMATCH i=<i> got=<v> want=<w> (then exits 5)
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "longhaul/longhaul.h"

namespace {

struct Args {
  std::string master, node;
  uint32_t rail = 0, rails = 1, node_number = 0;
  size_t count = 100003;
  int steps = 1000000;
  int step_delay_ms = 0;
  int64_t wait_world = 1;
  lh_reduce_op op = LH_OP_SUM;
};

[[noreturn]] void die(lh_status s, const char* message) {
  std::printf("ERROR status=%s %s\n", lh_status_string(s), message);
  std::fflush(stdout);
  std::_Exit(s == LH_ERR_NODE_EVICTED ? 4 : 3);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--master")
      a.master = v;
    else if (flag == "--node")
      a.node = v;
    else if (flag == "--rail")
      a.rail = static_cast<uint32_t>(std::atoi(v));
    else if (flag == "--rails")
      a.rails = static_cast<uint32_t>(std::atoi(v));
    else if (flag == "--node-number")
      a.node_number = static_cast<uint32_t>(std::atoi(v));
    else if (flag == "--count")
      a.count = static_cast<size_t>(std::atoll(v));
    else if (flag == "--steps")
      a.steps = std::atoi(v);
    else if (flag == "--step-delay-ms")
      a.step_delay_ms = std::atoi(v);
    else if (flag == "--wait-world")
      a.wait_world = std::atoll(v);
    else if (flag == "--avg")
      a.op = std::string(v) == "1" ? LH_OP_AVG : LH_OP_SUM;
    else {
      std::fprintf(stderr, "node_allreduce_peer: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return a;
}

// FNV-1a over the bytes: enough to compare results across ranks.
uint64_t fingerprint(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Checks the result's shape (header comment); returns C, or exits on a mismatch. An average is
// the sum divided by world * rails, rounded once, so it is checked to f32 precision.
double check(const std::vector<float>& out, const Args& a, int64_t world, int step) {
  const double ranks = static_cast<double>(world) * a.rails;
  const bool avg = a.op == LH_OP_AVG;
  const double per_step = ranks * step;
  const double c = std::round((avg ? out[0] * ranks : out[0]) - per_step);
  for (size_t i = 0; i < out.size(); ++i) {
    const double sum = static_cast<double>(i % 13 + 1) * c + per_step;
    const double want = avg ? sum / ranks : sum;
    if (avg ? std::fabs(out[i] - want) > 1e-6 * std::fabs(want) : out[i] != want) {
      std::printf("MISMATCH i=%zu got=%.9g want=%.9g\n", i, static_cast<double>(out[i]), want);
      std::fflush(stdout);
      std::_Exit(5);
    }
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  lh_comm_options options;
  lh_comm_options_init(&options);
  options.master_address = a.master.c_str();
  options.listen_address = "127.0.0.1:0";
  options.node = a.node.c_str();
  options.node_rail = a.rail;
  options.node_rails = a.rails;
  options.peer_group = a.rail;
  lh_comm* comm = nullptr;
  if (lh_status s = lh_comm_create(&options, &comm); s != LH_OK) die(s, lh_last_error());
  lh_local_group* group = nullptr;
  if (lh_status s = lh_local_group_create(comm, nullptr, &group); s != LH_OK)
    die(s, lh_comm_last_error(comm));
  if (lh_status s = lh_comm_connect(comm); s != LH_OK) die(s, lh_comm_last_error(comm));

  // Start once `wait_world` nodes are in (joiners are admitted by update_topology here, and by
  // lh_node_allreduce itself later: on every rank of the node at once).
  for (int64_t world = 0;;) {
    lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
    if (world >= a.wait_world) break;
    int pending = 0;
    lh_comm_are_peers_pending(comm, &pending);
    if (pending)
      if (lh_status s = lh_comm_update_topology(comm); s != LH_OK) die(s, lh_comm_last_error(comm));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<float> in(a.count), out(a.count);
  for (int step = 0; step < a.steps;) {
    for (size_t i = 0; i < a.count; ++i)
      in[i] = static_cast<float>((a.node_number + 1) * (a.rail + 1) * (i % 13 + 1) + step);
    const lh_status s =
        lh_node_allreduce(group, in.data(), out.data(), a.count, LH_DTYPE_F32, a.op, nullptr, 3);
    if (s == LH_ERR_PEER_LOST || s == LH_ERR_ABORTED) {
      std::printf("RETRY %s %s\n", lh_status_string(s), lh_comm_last_error(comm));
      std::fflush(stdout);
      if (lh_status u = lh_comm_update_topology(comm); u != LH_OK) die(u, lh_comm_last_error(comm));
      continue;
    }
    if (s != LH_OK) die(s, lh_comm_last_error(comm));
    int64_t world = 0;
    lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
    const double c = check(out, a, world, step);
    std::printf("STEP step=%d world=%" PRId64 " c=%.0f hash=%016" PRIx64 "\n", step, world, c,
                fingerprint(out));
    std::fflush(stdout);
    ++step;
    if (a.step_delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(a.step_delay_ms));
  }
  lh_local_group_destroy(group);
  lh_comm_leave(comm, "done");
  lh_comm_destroy(comm);
  return 0;
}
