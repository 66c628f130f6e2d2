// A peer process for the sync-engine tests, written against the C API: it trains the
// RegressionTask (sync_objective.hpp) with lh_sync_engine_* and reports what the engine did.
//
//   sync_peer --master HOST:PORT --index I --peers N --steps S [--join] [--dim D] [--ranges R]
//             [--method diloco|co2|eager] [--sync-every H] [--fragments F] [--delay T]
//             [--mix A] [--codec none|u8|e3m0] [--policy retry|drop] [--inner-lr X]
//             [--nan-at-step K] [--deadline-ms MS] [--full-mesh] [--step-ms MS]
//             [--slow-after STEP] [--verify-every K] [--checkpoint-at K --checkpoint-dir D]
//             [--resume-dir D]
//
// Without --join it first calls lh_comm_update_topology until the group has N peers (the group
// starts together); with --join it is admitted wherever the group is. --step-ms makes every inner
// step take at least that long (a slower trainer), from step --slow-after on (default 0).
// --checkpoint-at K writes the engine's checkpoint and the weights to --checkpoint-dir after step
// K and exits 0 at once (as if killed there); --resume-dir continues from such a directory.
// Prints, one per line:
//   ready id <peer id>
//   started step <t> rank <r> world <n>
//   step <t>                                     after every engine step
//   round <fragment> <round> applied <0|1> participants <p> attempts <a> excluded <id,...|->
//   final step <t> hash <hex> rounds <applied> dropped <dropped> retries <r> memory <bytes>
//         late <rounds dropped at this peer's deadline> peak <bytes of the largest round>
//         data <sent> <received> control <sent> <received> state <sent> <received>
//   global <fragment> <hex float bits...>        the global parameters at the end
// then leaves and exits 0. Errors print "error <what> <status> <message>" and exit 3.
#include <getopt.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "longhaul/longhaul.h"
#include "sync_objective.hpp"

namespace {

struct Flags {
  std::string master;
  uint32_t index = 0, peers = 1, dim = 64, ranges = 4;
  uint64_t steps = 100;
  bool join = false, full_mesh = false;
  lh_sync_engine_options engine{};
  float inner_lr = 0.05f;
  int64_t nan_at_step = -1;
  uint32_t step_ms = 0;
  uint64_t slow_after = 0;
  int64_t checkpoint_at = -1;
  std::string checkpoint_dir, resume_dir;
};

[[noreturn]] void die(const char* what, lh_status s, const char* message) {
  std::printf("error %s %s %s\n", what, lh_status_string(s), message);
  std::fflush(stdout);
  std::_Exit(3);
}

void check(const char* what, lh_status s, const char* message) {
  if (s != LH_OK) die(what, s, message);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "sync_peer: %s\n", why);
  std::exit(2);
}

lh_outer_method parse_method(const std::string& m) {
  if (m == "diloco") return LH_OUTER_DILOCO;
  if (m == "co2") return LH_OUTER_CO2;
  if (m == "eager") return LH_OUTER_EAGER;
  usage("--method is diloco, co2 or eager");
}

Flags parse(int argc, char** argv) {
  Flags f;
  lh_sync_engine_options_init(&f.engine);
  enum {
    kMaster = 1,
    kIndex,
    kPeers,
    kSteps,
    kJoin,
    kDim,
    kRanges,
    kMethod,
    kH,
    kF,
    kTau,
    kMix,
    kCodec,
    kPolicy,
    kInnerLr,
    kNan,
    kDeadline,
    kFullMesh,
    kStepMs,
    kSlowAfter,
    kVerify,
    kCheckpointAt,
    kCheckpointDir,
    kResumeDir
  };
  static const option options[] = {{"master", 1, nullptr, kMaster},
                                   {"index", 1, nullptr, kIndex},
                                   {"peers", 1, nullptr, kPeers},
                                   {"steps", 1, nullptr, kSteps},
                                   {"join", 0, nullptr, kJoin},
                                   {"dim", 1, nullptr, kDim},
                                   {"ranges", 1, nullptr, kRanges},
                                   {"method", 1, nullptr, kMethod},
                                   {"sync-every", 1, nullptr, kH},
                                   {"fragments", 1, nullptr, kF},
                                   {"delay", 1, nullptr, kTau},
                                   {"mix", 1, nullptr, kMix},
                                   {"codec", 1, nullptr, kCodec},
                                   {"policy", 1, nullptr, kPolicy},
                                   {"inner-lr", 1, nullptr, kInnerLr},
                                   {"nan-at-step", 1, nullptr, kNan},
                                   {"deadline-ms", 1, nullptr, kDeadline},
                                   {"full-mesh", 0, nullptr, kFullMesh},
                                   {"step-ms", 1, nullptr, kStepMs},
                                   {"slow-after", 1, nullptr, kSlowAfter},
                                   {"verify-every", 1, nullptr, kVerify},
                                   {"checkpoint-at", 1, nullptr, kCheckpointAt},
                                   {"checkpoint-dir", 1, nullptr, kCheckpointDir},
                                   {"resume-dir", 1, nullptr, kResumeDir},
                                   {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "", options, nullptr)) != -1;) {
    const std::string v = optarg ? optarg : "";
    switch (c) {
      case kMaster:
        f.master = v;
        break;
      case kIndex:
        f.index = static_cast<uint32_t>(std::stoul(v));
        break;
      case kPeers:
        f.peers = static_cast<uint32_t>(std::stoul(v));
        break;
      case kSteps:
        f.steps = std::stoull(v);
        break;
      case kJoin:
        f.join = true;
        break;
      case kDim:
        f.dim = static_cast<uint32_t>(std::stoul(v));
        break;
      case kRanges:
        f.ranges = static_cast<uint32_t>(std::stoul(v));
        break;
      case kMethod:
        f.engine.method = parse_method(v);
        break;
      case kH:
        f.engine.sync_every = static_cast<uint32_t>(std::stoul(v));
        break;
      case kF:
        f.engine.fragments = static_cast<uint32_t>(std::stoul(v));
        break;
      case kTau:
        f.engine.delay = static_cast<uint32_t>(std::stoul(v));
        break;
      case kMix:
        f.engine.mix = std::stof(v);
        break;
      case kCodec:
        f.engine.codec = v == "u8" ? LH_CODEC_U8 : v == "e3m0" ? LH_CODEC_E3M0 : LH_CODEC_NONE;
        break;
      case kPolicy:
        f.engine.on_loss = v == "drop" ? LH_LOSS_DROP : LH_LOSS_RETRY;
        break;
      case kInnerLr:
        f.inner_lr = std::stof(v);
        break;
      case kNan:
        f.nan_at_step = std::stoll(v);
        break;
      case kDeadline:
        f.engine.deadline_ms = static_cast<uint32_t>(std::stoul(v));
        break;
      case kFullMesh:
        f.full_mesh = true;
        break;
      case kSlowAfter:
        f.slow_after = std::stoull(v);
        break;
      case kCheckpointAt:
        f.checkpoint_at = std::stoll(v);
        break;
      case kCheckpointDir:
        f.checkpoint_dir = v;
        break;
      case kResumeDir:
        f.resume_dir = v;
        break;
      case kVerify:
        f.engine.verify_every = static_cast<uint32_t>(std::stoul(v));
        break;
      case kStepMs:
        f.step_ms = static_cast<uint32_t>(std::stoul(v));
        break;
      default:
        usage("unknown flag");
    }
  }
  if (f.master.empty()) usage("--master is required");
  if (f.ranges == 0 || f.dim % f.ranges != 0) usage("--dim must be a multiple of --ranges");
  return f;
}

lh_comm* connect(const Flags& f) {
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = f.master.c_str();
  o.listen_address = "127.0.0.1:0";
  o.full_mesh = f.full_mesh ? 1 : 0;
  lh_comm* comm = nullptr;
  check("create", lh_comm_create(&o, &comm), lh_last_error());
  check("connect", lh_comm_connect(comm), lh_comm_last_error(comm));
  int64_t id = 0;
  lh_comm_get_attribute(comm, LH_ATTR_PEER_ID, &id);
  std::printf("ready id %lld\n", static_cast<long long>(id));
  std::fflush(stdout);
  if (f.join) return comm;
  for (int64_t world = 0;;) {
    lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
    if (world >= f.peers) return comm;
    check("update_topology", lh_comm_update_topology(comm), lh_comm_last_error(comm));
  }
}

void report_round(lh_sync_engine* engine, uint64_t* last_seen) {
  lh_sync_stats s;
  lh_sync_engine_get_stats(engine, &s);
  const uint64_t settled = s.rounds_applied + s.rounds_dropped;
  if (settled == *last_seen) return;
  *last_seen = settled;
  uint64_t ids[64];
  size_t n = 0;
  lh_sync_engine_last_excluded(engine, ids, 64, &n);
  std::string excluded;
  for (size_t i = 0; i < n && i < 64; ++i) excluded += (i ? "," : "") + std::to_string(ids[i]);
  std::printf("round %u %llu applied %d participants %u attempts %u excluded %s\n", s.last_fragment,
              static_cast<unsigned long long>(s.last_round), s.last_applied, s.last_participants,
              s.last_attempts, excluded.empty() ? "-" : excluded.c_str());
}

void report_end(lh_sync_engine* engine, const Flags& f) {
  lh_sync_stats s;
  lh_sync_engine_get_stats(engine, &s);
  uint64_t hash = 0;
  lh_sync_engine_hash(engine, &hash);
  std::printf(
      "final step %llu hash %016llx rounds %llu dropped %llu retries %llu memory %llu late %llu "
      "peak %llu data %llu %llu control %llu %llu state %llu %llu\n",
      static_cast<unsigned long long>(s.steps), static_cast<unsigned long long>(hash),
      static_cast<unsigned long long>(s.rounds_applied),
      static_cast<unsigned long long>(s.rounds_dropped), static_cast<unsigned long long>(s.retries),
      static_cast<unsigned long long>(s.memory_bytes),
      static_cast<unsigned long long>(s.rounds_late),
      static_cast<unsigned long long>(s.peak_event_bytes),
      static_cast<unsigned long long>(s.traffic.data_sent),
      static_cast<unsigned long long>(s.traffic.data_received),
      static_cast<unsigned long long>(s.traffic.control_sent),
      static_cast<unsigned long long>(s.traffic.control_received),
      static_cast<unsigned long long>(s.traffic.state_sent),
      static_cast<unsigned long long>(s.traffic.state_received));
  const uint32_t fragments = f.engine.fragments;
  for (uint32_t fr = 0; fr < fragments; ++fr) {
    const size_t size = f.dim / f.ranges * ((f.ranges - fr + fragments - 1) / fragments);
    std::vector<float> g(size);
    check("get_global", lh_sync_engine_get_global(engine, fr, g.data(), g.size()),
          lh_sync_engine_last_error(engine));
    std::printf("global %u", fr);
    for (float x : g) {
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      std::printf(" %08x", bits);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse(argc, argv);
  lh_comm* comm = connect(f);
  std::vector<float> w = longhaul::testing::RegressionTask::initial(f.dim);
  const size_t per_range = f.dim / f.ranges;
  std::vector<lh_param_range> ranges;
  for (uint32_t r = 0; r < f.ranges; ++r)
    ranges.push_back({w.data() + r * per_range, per_range, LH_DTYPE_F32});
  f.engine.ranges = ranges.data();
  f.engine.range_count = ranges.size();
  const std::string resume_path = f.resume_dir + "/engine.ckpt";
  if (!f.resume_dir.empty()) {
    std::ifstream in(f.resume_dir + "/weights.bin", std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(w.size() * 4)))
      die("resume", LH_ERR_IO, "cannot read weights.bin");
    f.engine.resume_path = resume_path.c_str();
  }
  lh_sync_engine* engine = nullptr;
  check("start", lh_sync_engine_start(comm, &f.engine, &engine), lh_comm_last_error(comm));
  lh_sync_stats s;
  lh_sync_engine_get_stats(engine, &s);
  int64_t rank = 0, world = 0;
  lh_comm_get_attribute(comm, LH_ATTR_RANK, &rank);
  lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
  std::printf("started step %llu rank %lld world %lld\n", static_cast<unsigned long long>(s.steps),
              static_cast<long long>(rank), static_cast<long long>(world));
  std::fflush(stdout);
  const longhaul::testing::RegressionTask task(f.dim, f.index);
  uint64_t seen = s.rounds_applied + s.rounds_dropped;
  for (uint64_t t = s.steps + 1; t <= f.steps; ++t) {
    task.step(w, t, f.inner_lr);
    if (f.step_ms && t > f.slow_after)
      std::this_thread::sleep_for(std::chrono::milliseconds(f.step_ms));
    if (static_cast<int64_t>(t) == f.nan_at_step) w[0] = std::numeric_limits<float>::quiet_NaN();
    check("step", lh_sync_engine_step(engine), lh_sync_engine_last_error(engine));
    report_round(engine, &seen);
    std::printf("step %llu\n", static_cast<unsigned long long>(t));
    std::fflush(stdout);
    if (static_cast<int64_t>(t) == f.checkpoint_at) {
      const std::string path = f.checkpoint_dir + "/engine.ckpt";
      check("save", lh_sync_engine_save(engine, path.c_str()), lh_sync_engine_last_error(engine));
      std::ofstream out(f.checkpoint_dir + "/weights.bin", std::ios::binary);
      out.write(reinterpret_cast<const char*>(w.data()),
                static_cast<std::streamsize>(w.size() * 4));
      if (!out.flush()) die("checkpoint", LH_ERR_IO, "cannot write weights.bin");
      std::printf("checkpointed %llu\n", static_cast<unsigned long long>(t));
      std::fflush(stdout);
      std::_Exit(0);
    }
  }
  check("close", lh_sync_engine_close(engine), lh_sync_engine_last_error(engine));
  report_round(engine, &seen);
  report_end(engine, f);
  std::fflush(stdout);
  lh_sync_engine_destroy(engine);
  lh_comm_leave(comm, "done");
  lh_comm_destroy(comm);
  return 0;
}
