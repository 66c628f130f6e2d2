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
// With --alternate-restore the timed ops take turns: even ones keep the restore copy of the
// in-place input (the default), odd ones waive it. Each pair runs seconds apart at most, so the
// JSON's per-mode times show the copy's cost free of this shared machine's drift between runs.
#include <getopt.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.h>

namespace {

struct Args {
  std::string master, listen = "127.0.0.1:0", codec = "none", schedule = "auto";
  std::string op = "sum";  // the reference's op: torch.distributed.all_reduce sums
  long world = 2, iterations = 5, warmup = 1, connections = 1;  // K: the library's default
  long io_threads = 0, segment_bytes = 0, block = 0;            // 0: the library's defaults
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

}  // namespace

int main(int argc, char** argv) {
  Args a;
  static const option options[] = {{"master", required_argument, nullptr, 'm'},
                                   {"world", required_argument, nullptr, 'w'},
                                   {"bytes", required_argument, nullptr, 'b'},
                                   {"iterations", required_argument, nullptr, 'i'},
                                   {"warmup", required_argument, nullptr, 'u'},
                                   {"codec", required_argument, nullptr, 'c'},
                                   {"schedule", required_argument, nullptr, 's'},
                                   {"connections", required_argument, nullptr, 'k'},
                                   {"listen", required_argument, nullptr, 'l'},
                                   {"io-threads", required_argument, nullptr, 't'},
                                   {"segment-bytes", required_argument, nullptr, 'g'},
                                   {"op", required_argument, nullptr, 'o'},
                                   {"block", required_argument, nullptr, 'q'},
                                   {"error", no_argument, nullptr, 'e'},
                                   {"no-restore", no_argument, nullptr, 'n'},
                                   {"alternate-restore", no_argument, nullptr, 'r'},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "h", options, nullptr)) != -1) {
    switch (opt) {
      case 'm':
        a.master = optarg;
        break;
      case 'w':
        a.world = std::atol(optarg);
        break;
      case 'b':
        a.bytes = std::strtoull(optarg, nullptr, 10);
        break;
      case 'i':
        a.iterations = std::atol(optarg);
        break;
      case 'u':
        a.warmup = std::atol(optarg);
        break;
      case 'c':
        a.codec = optarg;
        break;
      case 's':
        a.schedule = optarg;
        break;
      case 'k':
        a.connections = std::atol(optarg);
        break;
      case 'l':
        a.listen = optarg;
        break;
      case 't':
        a.io_threads = std::atol(optarg);
        break;
      case 'g':
        a.segment_bytes = std::atol(optarg);
        break;
      case 'o':
        a.op = optarg;
        break;
      case 'q':
        a.block = std::atol(optarg);
        break;
      case 'e':
        a.error = true;
        break;
      case 'n':
        a.restore_input = false;
        break;
      case 'r':
        a.alternate_restore = true;
        break;
      case 'h':
        std::puts(
            "longhaul-allreduce-worker --master HOST:PORT --world N [--bytes B] [--iterations I] "
            "[--warmup W]\n"
            "  [--codec none|fp16|bf16|u8|u4] [--schedule auto|ring|direct] [--connections K] "
            "[--listen HOST:0]\n"
            "  [--io-threads T] [--segment-bytes B] [--block ELEMENTS]   (0: the library's "
            "defaults) [--op sum|avg]\n"
            "  [--no-restore]   waive the restore of the in-place input on failure (no backup "
            "copy)\n"
            "  [--alternate-restore]   timed ops alternate: restore copy kept (even), waived "
            "(odd)\n"
            "  [--error]   one all-reduce of gradient-like data; prints its relative L2 error");
        return 0;
      default:
        return 2;
    }
  }
  if (a.master.empty() || a.world < 1 || a.iterations < 1 || a.bytes < 4)
    die("arguments", "see --help");
  if (a.op != "sum" && a.op != "avg") die("--op", "must be sum or avg");
  const lh_reduce_op reduce_op = a.op == "sum" ? LH_OP_SUM : LH_OP_AVG;

  lh_comm_options co;
  lh_comm_options_init(&co);
  co.master_address = a.master.c_str();
  co.listen_address = a.listen.c_str();
  co.connections_per_link = static_cast<uint32_t>(a.connections);
  co.io_threads = static_cast<uint32_t>(a.io_threads);
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
  int64_t rank = 0;
  lh_comm_get_attribute(comm, LH_ATTR_RANK, &rank);

  const size_t count = a.bytes / 4;
  std::vector<float> data(count);
  if (a.error)
    data = gradient_like(count, rank);
  else
    for (size_t i = 0; i < count; ++i)
      data[i] = static_cast<float>((i * 2654435761u + static_cast<size_t>(rank)) % 1000) / 1000.0f;
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
  std::vector<double> times, cpus;
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
  double cpu_timed_s = 0;
  for (long it = 0; it < a.warmup + a.iterations; ++it) {
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
    if (lh_allreduce_async(comm, data.data(), data.data(), count, LH_DTYPE_F32, reduce_op, &ro,
                           &op) != LH_OK)
      die("lh_allreduce_async", lh_comm_last_error(comm));
    if (lh_op_wait(op) != LH_OK) die("all-reduce", lh_op_last_error(op));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = process_cpu_s() - cpu0;
    lh_op_get_info(op, &info);
    lh_op_destroy(op);
    if (it >= a.warmup) {
      times.push_back(seconds);
      cpus.push_back(cpu);
      cpu_timed_s += cpu;
    }
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  std::printf(
      "{\"rank\":%lld,\"world\":%ld,\"bytes\":%zu,\"op\":\"%s\",\"codec\":\"%s\",\"schedule\":\"%"
      "s\",\"times_s\":"
      "[",
      static_cast<long long>(rank), a.world, a.bytes, a.op.c_str(), a.codec.c_str(),
      schedule_name(info.schedule));
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.6f", i ? "," : "", times[i]);
  std::printf(
      "],\"median_s\":%.6f,\"cpu_s_per_op\":%.6f,\"bytes_sent\":%llu,\"bytes_received\":%llu",
      sorted[sorted.size() / 2], cpu_timed_s / static_cast<double>(times.size()),
      static_cast<unsigned long long>(info.bytes_sent),
      static_cast<unsigned long long>(info.bytes_received));
  if (a.alternate_restore) {
    // Each mode's op times and CPU seconds, in order: pair i is (restore[i], norestore[i]).
    auto list = [](const char* key, const std::vector<double>& v, size_t parity) {
      std::printf(",\"%s\":[", key);
      for (size_t i = parity, first = 1; i < v.size(); i += 2, first = 0)
        std::printf("%s%.6f", first ? "" : ",", v[i]);
      std::printf("]");
    };
    list("restore_times_s", times, 0);
    list("norestore_times_s", times, 1);
    list("restore_cpu_s", cpus, 0);
    list("norestore_cpu_s", cpus, 1);
  }
  if (a.error)
    std::printf(",\"block\":%u,\"rel_l2\":%.9g", ro.block, relative_l2_vs_exact_sum(data, a.world));
  std::printf("}\n");
  std::fflush(stdout);
  lh_comm_leave(comm, "benchmark done");
  lh_comm_destroy(comm);
  return 0;
}
