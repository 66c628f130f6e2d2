// longhaul-collectives-worker: one member of the collectives benchmark (bench/run collectives).
//
// Joins the master, waits until the group has --world members, then times --iterations of one
// collective over f32 data and prints one JSON line:
//   allgather       every member contributes --bytes / N; the gathered buffer is --bytes
//   reduce_scatter  every member's input is --bytes; each receives its --bytes / N, summed
//   broadcast       --bytes from ring position 0
//   barrier         no data
// Each timed op is preceded by an untimed one-element all-reduce that lines the members up (the
// gloo reference times each op after an untimed barrier the same way). The last op's result is
// checked against the values every member put in.
//
// --rtt instead measures the round trip of one byte over TCP on 127.0.0.1 (two threads of this
// process; no group): the unit in which the benchmark reports the small collectives' latency.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.h>
#include <nlohmann/json.hpp>

#include "loopback_rtt.hpp"
#include "tool_cli.hpp"

namespace {

struct Args {
  std::string master, listen = "127.0.0.1:0", codec = "none", schedule = "auto";
  std::string collective = "allgather";
  long world = 2, iterations = 5, warmup = 1, connections = 1, segment_bytes = 0;
  size_t bytes = 256u << 20;
  bool restore = true, rtt = false;
};

[[noreturn]] void die(const char* what, const char* message) {
  std::fprintf(stderr, "longhaul-collectives-worker: %s: %s\n", what, message);
  std::exit(1);
}

std::optional<int> parse_args(int argc, char** argv, Args* a) {
  CLI::App app{"One member of the collectives benchmark (bench/run collectives).\n",
               "longhaul-collectives-worker"};
  longhaul::cli::configure(app, "");
  using longhaul::cli::add_number;
  using longhaul::cli::one_of;
  app.add_option("--master", a->master, "the master to join")->type_name("HOST:PORT");
  app.add_option("--collective", a->collective, "allgather, reduce_scatter, broadcast, barrier")
      ->check(one_of({"allgather", "reduce_scatter", "broadcast", "barrier"}));
  add_number(app, "--world", a->world, 1, INT32_MAX, "members to wait for");
  add_number(app, "--bytes", a->bytes, 0, SIZE_MAX, "bytes of f32 (see the header)");
  add_number(app, "--iterations", a->iterations, 1, INT32_MAX, "timed ops");
  add_number(app, "--warmup", a->warmup, 0, INT32_MAX, "untimed ops before them");
  app.add_option("--codec", a->codec, "none or u8")->check(one_of({"none", "u8"}));
  app.add_option("--schedule", a->schedule, "auto, ring or direct")
      ->check(one_of({"auto", "ring", "direct"}));
  add_number(app, "--connections", a->connections, 0, 1024, "TCP connections per link");
  add_number(app, "--segment-bytes", a->segment_bytes, 0, UINT32_MAX, "0: the default");
  app.add_option("--listen", a->listen, "data listener")->type_name("HOST:0");
  app.add_flag_callback(
      "--no-restore", [a] { a->restore = false; }, "keep no copy of the output for a failure");
  app.add_flag("--rtt", a->rtt, "measure the loopback TCP round trip instead (no group)");
  return longhaul::cli::parse(app, argc, argv);
}

lh_comm* join_group(const Args& a) {
  lh_comm_options co;
  lh_comm_options_init(&co);
  co.master_address = a.master.c_str();
  co.listen_address = a.listen.c_str();
  co.connections_per_link = static_cast<uint32_t>(a.connections);
  co.full_mesh = 1;  // so the direct schedule can run
  lh_comm* comm = nullptr;
  if (lh_comm_create(&co, &comm) != LH_OK) die("lh_comm_create", lh_last_error());
  if (lh_comm_connect(comm) != LH_OK) die("lh_comm_connect", lh_comm_last_error(comm));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int64_t size = 0;;) {
    if (lh_comm_update_topology(comm) != LH_OK)
      die("lh_comm_update_topology", lh_comm_last_error(comm));
    lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &size);
    if (size >= a.world) break;
    if (std::chrono::steady_clock::now() > deadline) die("waiting for the group", "timed out");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return comm;
}

// Member r's value at element i of its input: small integers, exact in f32 sums.
float value(size_t r, size_t i) {
  return static_cast<float>((i * 7 + r * 13) % 64);
}

struct Buffers {
  std::vector<float> in, out;
};

Buffers make_buffers(const Args& a, size_t rank) {
  const size_t whole = a.bytes / 4, part = whole / static_cast<size_t>(a.world);
  Buffers b;
  const bool gathers = a.collective == "allgather";
  b.in.resize(gathers ? part : a.collective == "barrier" ? 0 : whole);
  for (size_t i = 0; i < b.in.size(); ++i) b.in[i] = value(rank, gathers ? rank * part + i : i);
  b.out.assign(a.collective == "reduce_scatter" ? part : gathers ? whole : 0, 0.0f);
  if (a.collective == "broadcast") b.out = b.in;  // in place
  return b;
}

lh_op* start(lh_comm* comm, const Args& a, Buffers& b, const lh_allreduce_options& o) {
  lh_op* op = nullptr;
  lh_status s = LH_OK;
  if (a.collective == "allgather")
    s = lh_allgather_async(comm, b.in.data(), b.in.size(), b.out.data(), nullptr, LH_DTYPE_F32, &o,
                           &op);
  else if (a.collective == "reduce_scatter")
    s = lh_reduce_scatter_async(comm, b.in.data(), b.out.data(), b.out.size(), nullptr,
                                LH_DTYPE_F32, LH_OP_SUM, &o, &op);
  else if (a.collective == "broadcast")
    s = lh_broadcast_async(comm, b.out.data(), b.out.size(), LH_DTYPE_F32, 0, &o, &op);
  else
    s = lh_barrier_async(comm, &o, &op);
  if (s != LH_OK) die(a.collective.c_str(), lh_comm_last_error(comm));
  return op;
}

// Whether the last op's output holds what every member put in (exact unquantized).
bool result_ok(const Args& a, const Buffers& b, size_t rank) {
  const size_t n = static_cast<size_t>(a.world), part = a.bytes / 4 / n;
  for (size_t i = 0; i < b.out.size(); i += std::max<size_t>(1, b.out.size() / 1000)) {
    double expect = value(0, i);
    if (a.collective == "reduce_scatter") {
      expect = 0;
      for (size_t r = 0; r < n; ++r) expect += value(r, rank * part + i);
    } else if (a.collective == "allgather") {
      expect = value(i / part, i);
    }
    const double tolerance = a.codec == "none" ? 0 : 0.02 * 64 * static_cast<double>(n);
    if (std::fabs(b.out[i] - expect) > tolerance) return false;
  }
  return true;
}

void line_up(lh_comm* comm) {
  float token = 0;
  if (lh_allreduce(comm, &token, &token, 1, LH_DTYPE_F32, LH_OP_SUM, nullptr, nullptr) != LH_OK)
    die("line-up all-reduce", lh_comm_last_error(comm));
}

int run_rtt() {
  std::vector<double> t = loopback_round_trips(2000, 200);
  if (t.empty()) die("--rtt", "a loopback socket call failed");
  std::sort(t.begin(), t.end());
  nlohmann::ordered_json j = {{"rtt_median_s", t[t.size() / 2]},
                              {"rtt_p10_s", t[t.size() / 10]},
                              {"rtt_p90_s", t[t.size() * 9 / 10]},
                              {"round_trips", t.size()}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto exit_status = parse_args(argc, argv, &a)) return *exit_status;
  if (a.rtt) return run_rtt();
  if (a.master.empty()) die("--master", "is required");
  lh_comm* comm = join_group(a);
  int64_t rank = 0;
  lh_comm_get_attribute(comm, LH_ATTR_RANK, &rank);
  Buffers b = make_buffers(a, static_cast<size_t>(rank));
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  o.codec = a.codec == "u8" ? LH_CODEC_U8 : LH_CODEC_NONE;
  o.schedule = a.schedule == "ring"     ? LH_SCHEDULE_RING
               : a.schedule == "direct" ? LH_SCHEDULE_DIRECT
                                        : LH_SCHEDULE_AUTO;
  if (a.segment_bytes > 0) o.segment_bytes = static_cast<uint32_t>(a.segment_bytes);
  o.restore_input = a.restore ? 1 : 0;
  std::vector<double> times;
  lh_op_info info{};
  for (long it = 0; it < a.warmup + a.iterations; ++it) {
    line_up(comm);
    const auto t0 = std::chrono::steady_clock::now();
    lh_op* op = start(comm, a, b, o);
    if (lh_op_wait(op) != LH_OK) die(a.collective.c_str(), lh_op_last_error(op));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lh_op_get_info(op, &info);
    lh_op_destroy(op);
    if (it >= a.warmup) times.push_back(s);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  nlohmann::ordered_json j = {
      {"rank", rank},
      {"world", a.world},
      {"bytes", a.bytes},
      {"collective", a.collective},
      {"codec", a.codec},
      {"schedule", info.schedule == LH_SCHEDULE_DIRECT ? "direct" : "ring"},
      {"times_s", times},
      {"median_s", sorted[sorted.size() / 2]},
      {"bytes_sent", info.bytes_sent},
      {"bytes_received", info.bytes_received},
      {"result_ok", result_ok(a, b, static_cast<size_t>(rank))},
  };
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  lh_comm_leave(comm, "benchmark done");
  lh_comm_destroy(comm);
  return 0;
}
