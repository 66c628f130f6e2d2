// longhaul-allreduce-worker: one member of the all-reduce benchmark (bench/run allreduce).
//
// Joins the master, waits until the group has --world members, then times --iterations in-place
// all-reduces of --bytes of f32 and prints one JSON line. Each timed op is preceded by an untimed
// one-element all-reduce that lines the members up (the gloo reference times its all_reduce
// after an untimed barrier the same way).
//
// With --error it instead measures the quantization error: every rank's input is N(0,1) with a few
// large outliers (reproducible from the rank), one all-reduce runs, and the JSON line carries the
// relative L2 error of the result against the exact sum of every rank's input (in double).
//
// With --idle-ms every timed op follows that long a silence (bench/e2e/warm_sync.py: a sync after
// idle against a warm one).
//
// With --alternate-restore the timed ops take turns: even ones keep the restore copy of the
// in-place input (the default), odd ones waive it. Each pair runs seconds apart at most, so the
// JSON's per-mode times show the copy's cost free of this shared machine's drift between runs.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.h>
#include <nlohmann/json.hpp>

#include "tool_cli.hpp"
#include "worker_buffer.hpp"

namespace {

struct Args {
  std::string master, listen = "127.0.0.1:0", codec = "none", schedule = "auto";
  std::string op = "sum";  // the reference's op: torch.distributed.all_reduce sums
  std::string device = "cpu", dtype = "f32";
  long world = 2, iterations = 5, warmup = 1, connections = 1;  // K: the library's default
  long io_threads = 0, segment_bytes = 0, block = 0;            // 0: the library's defaults
  long link_upload_mbit = 0;                                    // 0: no upload cap
  long idle_ms = 0;  // silence before each timed op (a sync after compute: docs/overlap.md)
  size_t bytes = 256u << 20;
  bool error = false;
  bool restore_input = true;
  bool alternate_restore = false;
};

// Rank r's input of an --error run: N(0, 1), with one element in 10 000 replaced by +-100 (the
// large, rare values of real gradients that flatten a single min-max scale).
std::vector<float> gradient_like(size_t count, int64_t rank) {
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count);
  for (float& v : x) v = normal(rng);
  std::uniform_int_distribution<size_t> where(0, count - 1);
  for (size_t k = 0; k < std::max<size_t>(1, count / 10000); ++k)
    x[where(rng)] = (rng() & 1) != 0 ? 100.0f : -100.0f;
  return x;
}

// ||got - exact|| / ||exact||, exact being the sum of every rank's gradient_like input.
double relative_l2_vs_exact_sum(const std::vector<float>& got, long world) {
  std::vector<double> exact(got.size(), 0.0);
  for (long r = 0; r < world; ++r) {
    const std::vector<float> x = gradient_like(got.size(), r);
    for (size_t i = 0; i < x.size(); ++i) exact[i] += x[i];
  }
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - exact[i]) * (got[i] - exact[i]);
    norm += exact[i] * exact[i];
  }
  return std::sqrt(diff / norm);
}

[[noreturn]] void die(const char* what, const char* message) {
  std::fprintf(stderr, "longhaul-allreduce-worker: %s: %s\n", what, message);
  std::exit(1);
}

lh_codec parse_codec(const std::string& s) {
  if (s == "none") return LH_CODEC_NONE;
  if (s == "fp16") return LH_CODEC_FP16;
  if (s == "bf16") return LH_CODEC_BF16;
  if (s == "u8") return LH_CODEC_U8;
  if (s == "u4") return LH_CODEC_U4;
  die("--codec", "must be none, fp16, bf16, u8 or u4");
}

lh_schedule parse_schedule(const std::string& s) {
  if (s == "auto") return LH_SCHEDULE_AUTO;
  if (s == "ring") return LH_SCHEDULE_RING;
  if (s == "direct") return LH_SCHEDULE_DIRECT;
  die("--schedule", "must be auto, ring or direct");
}

const char* schedule_name(lh_schedule s) {
  return s == LH_SCHEDULE_RING ? "ring" : s == LH_SCHEDULE_DIRECT ? "direct" : "auto";
}

// Every flag into *a; the exit status when the program must stop now (--help, a bad flag).
std::optional<int> parse_args(int argc, char** argv, Args* a) {
  CLI::App app{"One member of the all-reduce benchmark (bench/run allreduce).\n",
               "longhaul-allreduce-worker"};
  longhaul::cli::configure(app, "");
  using longhaul::cli::add_number;
  using longhaul::cli::one_of;
  app.add_option("--master", a->master, "the master to join")->type_name("HOST:PORT")->required();
  add_number(app, "--world", a->world, 1, INT32_MAX, "members to wait for");
  add_number(app, "--bytes", a->bytes, 4, SIZE_MAX, "bytes per all-reduce");
  add_number(app, "--iterations", a->iterations, 1, INT32_MAX, "timed all-reduces");
  add_number(app, "--warmup", a->warmup, 0, INT32_MAX, "untimed all-reduces before them");
  app.add_option("--codec", a->codec, "none, fp16, bf16, u8 or u4")
      ->type_name("C")
      ->check(one_of({"none", "fp16", "bf16", "u8", "u4"}));
  app.add_option("--schedule", a->schedule, "auto, ring or direct")
      ->type_name("S")
      ->check(one_of({"auto", "ring", "direct"}));
  add_number(app, "--connections", a->connections, 0, 1024, "TCP connections per link");
  app.add_option("--listen", a->listen, "data listener")->type_name("HOST:0");
  add_number(app, "--io-threads", a->io_threads, 0, 1024, "0: the library's default");
  add_number(app, "--segment-bytes", a->segment_bytes, 0, UINT32_MAX, "0: the library's default");
  add_number(app, "--link-upload-mbit", a->link_upload_mbit, 0, UINT32_MAX,
             "upload cap of each data link (lh_comm_options.link_upload_mbit); 0: none");
  add_number(app, "--idle-ms", a->idle_ms, 0, INT32_MAX,
             "milliseconds every member stays silent before each timed op (0: none)");
  add_number(app, "--block", a->block, 0, UINT32_MAX, "quantization block, elements; 0: default");
  app.add_option("--op", a->op, "sum or avg")->type_name("OP")->check(one_of({"sum", "avg"}));
  app.add_option("--device", a->device, "cpu, or cuda: the buffer in device memory")
      ->type_name("D")
      ->check(one_of({"cpu", "cuda"}));
  app.add_option("--dtype", a->dtype, "f32 or bf16 (codec none only)")
      ->type_name("T")
      ->check(one_of({"f32", "bf16"}));
  app.add_flag("--error", a->error,
               "one all-reduce of gradient-like data; prints its relative L2 error");
  app.add_flag_callback(
      "--no-restore", [a] { a->restore_input = false; },
      "waive the restore of the in-place input on failure (no backup copy)");
  app.add_flag("--alternate-restore", a->alternate_restore,
               "timed ops alternate: restore copy kept (even), waived (odd)");
  return longhaul::cli::parse(app, argc, argv);
}

// x rounded to microseconds, as the JSON line always printed times.
double micro(double x) {
  return std::round(x * 1e6) / 1e6;
}

// What the timed ops measured, in order.
struct Timings {
  std::vector<double> times, cpus;
  // Each op's start on CLOCK_MONOTONIC (steady_clock), which every process of this machine shares,
  // network namespaces included: the group's span of an op is max(start + time) - min(start)
  // over the ranks, free of the line-up's skew between them.
  std::vector<double> starts;
  double cpu_timed_s = 0;
};

// The one JSON line (bench/e2e/allreduce reads these names).
std::string result_json(const Args& a, int64_t rank, const lh_op_info& info, const Timings& t,
                        const lh_allreduce_options& ro, const WorkerBuffer& data) {
  const std::vector<double>& times = t.times;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  // Every other entry from `parity` on: pair i is (restore[i], norestore[i]).
  const auto every_other = [](const std::vector<double>& v, size_t parity) {
    std::vector<double> out;
    for (size_t i = parity; i < v.size(); i += 2) out.push_back(micro(v[i]));
    return out;
  };
  std::vector<double> rounded_times;
  for (double x : times) rounded_times.push_back(micro(x));
  nlohmann::ordered_json j = {
      {"rank", rank},
      {"world", a.world},
      {"bytes", a.bytes},
      {"op", a.op},
      {"codec", a.codec},
      {"device", a.device},
      {"dtype", a.dtype},
      {"schedule", schedule_name(info.schedule)},
      {"times_s", rounded_times},
      {"median_s", micro(sorted[sorted.size() / 2])},
      {"cpu_s_per_op", micro(t.cpu_timed_s / static_cast<double>(times.size()))},
      {"bytes_sent", info.bytes_sent},
      {"bytes_received", info.bytes_received},
  };
  if (a.alternate_restore) {
    j["restore_times_s"] = every_other(times, 0);
    j["norestore_times_s"] = every_other(times, 1);
    j["restore_cpu_s"] = every_other(t.cpus, 0);
    j["norestore_cpu_s"] = every_other(t.cpus, 1);
  }
  std::vector<double> starts;
  for (double x : t.starts) starts.push_back(micro(x));
  j["starts_mono_s"] = starts;
  if (a.error) {
    j["block"] = ro.block;
    j["rel_l2"] = relative_l2_vs_exact_sum(data.values(), a.world);
  }
  // What one all-reduce's staging costs on PCIe (device memory only): a copy to pinned host
  // memory and back, timed after the all-reduces.
  if (a.device == "cuda") j["pcie_round_trip_s"] = micro(data.pcie_round_trip_s(3));
  return j.dump();
}

// Joins the master and waits until the group has --world members.
lh_comm* join_group(const Args& a) {
  lh_comm_options co;
  lh_comm_options_init(&co);
  co.master_address = a.master.c_str();
  co.listen_address = a.listen.c_str();
  co.connections_per_link = static_cast<uint32_t>(a.connections);
  co.io_threads = static_cast<uint32_t>(a.io_threads);
  co.link_upload_mbit = static_cast<uint32_t>(a.link_upload_mbit);
  co.full_mesh = 1;  // so the direct schedule can run at any group size
  lh_comm* comm = nullptr;
  if (lh_comm_create(&co, &comm) != LH_OK) die("lh_comm_create", lh_last_error());
  if (lh_comm_connect(comm) != LH_OK) die("lh_comm_connect", lh_comm_last_error(comm));
  // Grow to the full group: newcomers are admitted at update_topology.
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

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto exit_status = parse_args(argc, argv, &a)) return *exit_status;
  const lh_reduce_op reduce_op = a.op == "sum" ? LH_OP_SUM : LH_OP_AVG;

  lh_comm* comm = join_group(a);
  int64_t rank = 0;
  lh_comm_get_attribute(comm, LH_ATTR_RANK, &rank);

  const lh_dtype dtype = a.dtype == "bf16" ? LH_DTYPE_BF16 : LH_DTYPE_F32;
  const size_t count = a.bytes / (dtype == LH_DTYPE_BF16 ? 2 : 4);
  std::vector<float> values(count);
  if (a.error)
    values = gradient_like(count, rank);
  else
    for (size_t i = 0; i < count; ++i)
      values[i] =
          static_cast<float>((i * 2654435761u + static_cast<size_t>(rank)) % 1000) / 1000.0f;
  const WorkerBuffer data(values, dtype, a.device);
  values = {};
  lh_allreduce_options ro;
  lh_allreduce_options_init(&ro);
  ro.codec = parse_codec(a.codec);
  ro.schedule = parse_schedule(a.schedule);
  if (a.segment_bytes > 0) ro.segment_bytes = static_cast<uint32_t>(a.segment_bytes);
  if (a.block > 0) ro.block = static_cast<uint32_t>(a.block);
  ro.restore_input = a.restore_input ? 1 : 0;
  if (a.error) {  // the error of one all-reduce of fresh data
    a.warmup = 0;
    a.iterations = 1;
  }
  if (a.alternate_restore && (a.iterations < 2 || !a.restore_input))
    die("--alternate-restore", "needs --iterations >= 2 and no --no-restore");
  Timings timings;
  lh_op_info info{};
  lh_allreduce_options barrier_options;
  lh_allreduce_options_init(&barrier_options);
  // Process CPU time (every thread, user and system) over the timed ops: on a machine whose cores
  // all ranks share, this is steadier than wall time and shows what an op costs.
  auto process_cpu_s = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  for (long it = 0; it < a.warmup + a.iterations; ++it) {
    // A timed op after --idle-ms of silence on every link (the line-up below sends only a few
    // bytes): what a DiLoCo sync after seconds of compute meets, e.g. TCP's restart after idle.
    if (it >= a.warmup && a.idle_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(a.idle_ms));
    // Untimed: a one-element all-reduce lines the members up, as the gloo reference's barrier
    // does, so an op's time does not include waiting for a member still finishing the last one.
    float token = 0;
    lh_op* barrier = nullptr;
    if (lh_allreduce_async(comm, &token, &token, 1, LH_DTYPE_F32, LH_OP_SUM, &barrier_options,
                           &barrier) != LH_OK)
      die("lh_allreduce_async (barrier)", lh_comm_last_error(comm));
    if (lh_op_wait(barrier) != LH_OK) die("barrier", lh_op_last_error(barrier));
    lh_op_destroy(barrier);
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_s();
    lh_op* op = nullptr;
    if (a.alternate_restore) ro.restore_input = it < a.warmup || (it - a.warmup) % 2 == 0;
    if (lh_allreduce_async(comm, data.data(), data.data(), count, dtype, reduce_op, &ro, &op) !=
        LH_OK)
      die("lh_allreduce_async", lh_comm_last_error(comm));
    if (lh_op_wait(op) != LH_OK) die("all-reduce", lh_op_last_error(op));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = process_cpu_s() - cpu0;
    lh_op_get_info(op, &info);
    lh_op_destroy(op);
    if (it >= a.warmup) {
      timings.times.push_back(seconds);
      timings.cpus.push_back(cpu);
      timings.starts.push_back(std::chrono::duration<double>(t0.time_since_epoch()).count());
      timings.cpu_timed_s += cpu;
    }
  }
  std::printf("%s\n", result_json(a, rank, info, timings, ro, data).c_str());
  std::fflush(stdout);
  lh_comm_leave(comm, "benchmark done");
  lh_comm_destroy(comm);
  return 0;
}
