// A peer process for the shared-state tests and the state benchmark, written against the C API.
//
//   state_peer --master HOST:PORT [--layout NAME:DTYPE:COUNT,...] [--connections K]
//              [--listen HOST:PORT] [--stall-timeout-ms MS] [--group G] [--tiny-tensors N]
//              [--upload-mbit M]
//
// Registers the tensors of --layout (default "w:f32:1048576"; dtypes f32 f64 f16 bf16 i8 u8 i32 u32
// i64 u64) and, with --tiny-tensors N, N more of one f32 each ("tiny0000000"...), joins peer
// group --group (default 0), listens for data links on --listen (default 127.0.0.1:0), caps what
// each of its links uploads at --upload-mbit (default uncapped), connects,
// prints "ready id <peer id>", then runs commands from stdin, one per line:
//   fill SEED            fill every tensor with bytes derived from SEED (same SEED: same bytes)
//   fill-sparse SEED     the same, but only one 4-byte word in ten is nonzero (compressible state)
//   flip T BYTE BIT      flip one bit of tensor number T (in --layout order)
//   zero T               set every byte of tensor number T to 0
//   revision R           lh_state_set_revision
//   world N              lh_comm_update_topology until the group has N peers -> "world N epoch E"
//   update               lh_comm_update_topology once -> "world <group's peers> epoch E" (the
//                        group's size is the epoch's: a lost peer counts until this call)
//   sync enforce|receive|send [background|spare]
//                        lh_sync_state -> "sync <status> ms <ms> cpu_ms <ms> tx <bytes> rx <bytes>
//                        blocks <n> sources <n> revision <r> hash <state hash> msg <error message>"
//                        (cpu_ms: this process's CPU time, all threads, during the call).
//                        background: the call runs on a thread and the next command is read at
//                        once; its line comes when it returns (one at a time, see join).
//                        spare: on a second registry over the same tensors (same names, memory and
//                        revision), so that it may run beside a background sync without touching
//                        that call's registry.
//   syncs N              N enforce-popular syncs back to back -> "syncs N ok <ok> ms <total>"
//   port                 -> "port <the data listener's port>"
//   join                 wait for the background sync (if any) to return -> "joined"
//   hash                 -> "hash <state hash> revision <r>"
//   dump PATH            write every tensor's bytes, in --layout order, to PATH -> "dumped"
//   quit                 leave gracefully and exit 0
// Errors outside sync print "error <what> <status> <message>" and exit 3.
#include <getopt.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "longhaul/longhaul.h"

namespace {

[[noreturn]] void die(const char* what, lh_status s, const char* message) {
  std::printf("error %s %s %s\n", what, lh_status_string(s), message);
  std::fflush(stdout);
  std::_Exit(3);
}

struct TensorSpec {
  std::string name;
  lh_dtype dtype = LH_DTYPE_F32;
  size_t count = 0;
  std::vector<unsigned char> bytes;
};

size_t element_size(lh_dtype d) {
  switch (d) {
    case LH_DTYPE_F64:
    case LH_DTYPE_I64:
    case LH_DTYPE_U64:
      return 8;
    case LH_DTYPE_F32:
    case LH_DTYPE_I32:
    case LH_DTYPE_U32:
      return 4;
    case LH_DTYPE_F16:
    case LH_DTYPE_BF16:
      return 2;
    default:
      return 1;
  }
}

bool parse_dtype(const std::string& s, lh_dtype* d) {
  static const std::pair<const char*, lh_dtype> names[] = {
      {"f32", LH_DTYPE_F32}, {"f64", LH_DTYPE_F64}, {"f16", LH_DTYPE_F16}, {"bf16", LH_DTYPE_BF16},
      {"i8", LH_DTYPE_I8},   {"u8", LH_DTYPE_U8},   {"i32", LH_DTYPE_I32}, {"u32", LH_DTYPE_U32},
      {"i64", LH_DTYPE_I64}, {"u64", LH_DTYPE_U64}};
  for (const auto& [n, v] : names)
    if (s == n) return (*d = v), true;
  return false;
}

std::vector<TensorSpec> parse_layout(const std::string& text) {
  std::vector<TensorSpec> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    TensorSpec t;
    const size_t a = item.find(':'), b = item.rfind(':');
    if (a == std::string::npos || a == b || !parse_dtype(item.substr(a + 1, b - a - 1), &t.dtype))
      die("layout", LH_ERR_INVALID_ARGUMENT, item.c_str());
    t.name = item.substr(0, a);
    t.count = std::stoull(item.substr(b + 1));
    t.bytes.assign(t.count * element_size(t.dtype), 0);
    out.push_back(std::move(t));
  }
  return out;
}

// SplitMix64: every byte depends on (seed, tensor, position).
void fill(std::vector<TensorSpec>& tensors, uint64_t seed) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    auto& b = tensors[t].bytes;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + t;
    size_t i = 0;
    for (; i + 8 <= b.size(); i += 8) {
      uint64_t z = (x += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      std::memcpy(&b[i], &z, 8);
    }
    for (; i < b.size(); ++i) b[i] = static_cast<unsigned char>(seed + i);
  }
}

// Words of zeros with one in ten drawn from (seed, tensor, position): a state zstd shrinks to a
// fifth or so, at a few hundred MB/s.
void fill_sparse(std::vector<TensorSpec>& tensors, uint64_t seed) {
  fill(tensors, seed);
  for (auto& t : tensors) {
    auto& b = t.bytes;
    for (size_t i = 0; i + 4 <= b.size(); i += 4) {
      uint32_t word;
      std::memcpy(&word, &b[i], 4);
      if (word % 10 != 0) std::memset(&b[i], 0, 4);
    }
  }
}

// User + system CPU time of the whole process (every thread), in ms.
double process_cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const long long us =
      (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000LL + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  return static_cast<double>(us) / 1e3;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One lh_sync_state and its "sync ..." line (one printf: stdio keeps a background sync's line
// whole beside the main thread's output).
void sync_and_print(lh_comm* comm, lh_state* state, lh_sync_strategy strategy) {
  lh_sync_info info;
  const double cpu0 = process_cpu_ms();
  const auto t0 = std::chrono::steady_clock::now();
  const lh_status s = lh_sync_state(comm, state, strategy, &info);
  const double ms = ms_since(t0);
  const double cpu_ms = process_cpu_ms() - cpu0;
  uint64_t hash = 0;
  lh_state_hash(state, &hash);
  std::printf(
      "sync %s ms %.3f cpu_ms %.3f tx %llu rx %llu blocks %llu sources %llu revision %llu hash "
      "%016llx msg %s\n",
      lh_status_string(s), ms, cpu_ms, static_cast<unsigned long long>(info.tx_bytes),
      static_cast<unsigned long long>(info.rx_bytes),
      static_cast<unsigned long long>(info.blocks_fetched),
      static_cast<unsigned long long>(info.sources), static_cast<unsigned long long>(info.revision),
      static_cast<unsigned long long>(hash), s == LH_OK ? "" : lh_state_last_error(state));
  std::fflush(stdout);
}

struct Args {
  std::string master, layout = "w:f32:1048576", listen = "127.0.0.1:0";
  uint32_t connections = 1, stall_timeout_ms = 0, group = 0, upload_mbit = 0;
  size_t tiny_tensors = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  static const option opts[] = {{"master", required_argument, nullptr, 'm'},
                                {"layout", required_argument, nullptr, 'l'},
                                {"connections", required_argument, nullptr, 'k'},
                                {"listen", required_argument, nullptr, 's'},
                                {"stall-timeout-ms", required_argument, nullptr, 't'},
                                {"group", required_argument, nullptr, 'g'},
                                {"tiny-tensors", required_argument, nullptr, 'n'},
                                {"upload-mbit", required_argument, nullptr, 'u'},
                                {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
    if (c == 'm')
      a.master = optarg;
    else if (c == 'l')
      a.layout = optarg;
    else if (c == 'k')
      a.connections = static_cast<uint32_t>(std::stoul(optarg));
    else if (c == 's')
      a.listen = optarg;
    else if (c == 't')
      a.stall_timeout_ms = static_cast<uint32_t>(std::stoul(optarg));
    else if (c == 'g')
      a.group = static_cast<uint32_t>(std::stoul(optarg));
    else if (c == 'n')
      a.tiny_tensors = std::stoul(optarg);
    else if (c == 'u')
      a.upload_mbit = static_cast<uint32_t>(std::stoul(optarg));
    else
      die("usage", LH_ERR_INVALID_ARGUMENT,
          "state_peer --master HOST:PORT [--layout L] [--connections K] [--listen HOST:PORT] "
          "[--stall-timeout-ms MS] [--group G] [--tiny-tensors N] [--upload-mbit M]");
  }
  return a;
}

// "syncs N": N enforce-popular syncs back to back -> "syncs N ok <count> ms <total ms>".
void run_syncs(lh_comm* comm, lh_state* state, size_t n) {
  size_t ok = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < n; ++i) {
    lh_sync_info info;
    ok += lh_sync_state(comm, state, LH_SYNC_ENFORCE_POPULAR, &info) == LH_OK ? 1 : 0;
  }
  std::printf("syncs %zu ok %zu ms %.3f\n", n, ok, ms_since(t0));
}

lh_state* make_state(std::vector<TensorSpec>& tensors) {
  lh_state* state = nullptr;
  if (lh_status s = lh_state_create(&state); s != LH_OK) die("lh_state_create", s, lh_last_error());
  for (auto& t : tensors)
    if (lh_status s = lh_state_add_tensor(state, t.name.c_str(), t.bytes.data(), t.count, t.dtype);
        s != LH_OK)
      die("lh_state_add_tensor", s, lh_last_error());
  return state;
}

lh_comm* connect(const Args& args) {
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = args.master.c_str();
  o.listen_address = args.listen.c_str();
  o.connections_per_link = args.connections;
  o.state_stall_timeout_ms = args.stall_timeout_ms;
  o.link_upload_mbit = args.upload_mbit;  // 0: uncapped
  o.peer_group = args.group;
  lh_comm* comm = nullptr;
  if (lh_status s = lh_comm_create(&o, &comm); s != LH_OK)
    die("lh_comm_create", s, lh_last_error());
  if (lh_status s = lh_comm_connect(comm); s != LH_OK)
    die("lh_comm_connect", s, lh_comm_last_error(comm));
  return comm;
}

struct Peer {
  std::vector<TensorSpec> tensors;
  lh_state* state = nullptr;
  lh_comm* comm = nullptr;
  lh_state* spare = nullptr;  // "sync ... spare"
  std::thread background;     // "sync ... background"
};

void print_world(lh_comm* comm) {
  int64_t world = 0, epoch = 0;
  lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
  lh_comm_get_attribute(comm, LH_ATTR_EPOCH, &epoch);
  std::printf("world %lld epoch %lld\n", static_cast<long long>(world),
              static_cast<long long>(epoch));
}

// "sync enforce|receive|send [background|spare]".
void sync_command(Peer& p, std::istringstream& in) {
  std::string how, where;
  in >> how >> where;
  const lh_sync_strategy strategy = how == "receive" ? LH_SYNC_RECEIVE_ONLY
                                    : how == "send"  ? LH_SYNC_SEND_ONLY
                                                     : LH_SYNC_ENFORCE_POPULAR;
  if (where == "background") {
    if (p.background.joinable()) die("sync", LH_ERR_INVALID_ARGUMENT, "a background sync runs");
    p.background = std::thread(
        [comm = p.comm, state = p.state, strategy] { sync_and_print(comm, state, strategy); });
  } else if (where == "spare") {
    if (!p.spare) p.spare = make_state(p.tensors);
    uint64_t revision = 0;
    lh_state_get_revision(p.state, &revision);
    lh_state_set_revision(p.spare, revision);
    sync_and_print(p.comm, p.spare, strategy);
  } else {
    sync_and_print(p.comm, p.state, strategy);
  }
}

// The commands on the communicator; false if `cmd` is none of them.
bool comm_command(Peer& p, const std::string& cmd, std::istringstream& in) {
  if (cmd == "world") {
    int64_t want = 0, world = 0;
    in >> want;
    for (;;) {
      lh_comm_get_attribute(p.comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
      if (world == want) break;
      if (lh_status s = lh_comm_update_topology(p.comm); s != LH_OK)
        die("lh_comm_update_topology", s, lh_comm_last_error(p.comm));
    }
    print_world(p.comm);
  } else if (cmd == "update") {
    if (lh_status s = lh_comm_update_topology(p.comm); s != LH_OK)
      die("lh_comm_update_topology", s, lh_comm_last_error(p.comm));
    print_world(p.comm);
  } else if (cmd == "sync") {
    sync_command(p, in);
  } else if (cmd == "syncs") {
    size_t n = 0;
    in >> n;
    run_syncs(p.comm, p.state, n);
  } else if (cmd == "port") {
    int64_t port = 0;
    lh_comm_get_attribute(p.comm, LH_ATTR_LISTEN_PORT, &port);
    std::printf("port %lld\n", static_cast<long long>(port));
  } else if (cmd == "join") {
    if (p.background.joinable()) p.background.join();
    std::printf("joined\n");
  } else {
    return false;
  }
  return true;
}

// The commands on the tensors; false if `cmd` is none of them.
bool state_command(Peer& p, const std::string& cmd, std::istringstream& in) {
  auto& tensors = p.tensors;
  if (cmd == "fill" || cmd == "fill-sparse") {
    uint64_t seed = 0;
    in >> seed;
    cmd == "fill" ? fill(tensors, seed) : fill_sparse(tensors, seed);
    std::printf("filled\n");
  } else if (cmd == "flip") {
    size_t t = 0, byte = 0;
    int bit = 0;
    in >> t >> byte >> bit;
    tensors.at(t).bytes.at(byte) ^= static_cast<unsigned char>(1u << bit);
    std::printf("flipped\n");
  } else if (cmd == "zero") {
    size_t t = 0;
    in >> t;
    std::fill(tensors.at(t).bytes.begin(), tensors.at(t).bytes.end(), 0);
    std::printf("zeroed\n");
  } else if (cmd == "revision") {
    uint64_t r = 0;
    in >> r;
    lh_state_set_revision(p.state, r);
    std::printf("revision set\n");
  } else if (cmd == "hash") {
    uint64_t hash = 0, revision = 0;
    lh_state_hash(p.state, &hash);
    lh_state_get_revision(p.state, &revision);
    std::printf("hash %016llx revision %llu\n", static_cast<unsigned long long>(hash),
                static_cast<unsigned long long>(revision));
  } else if (cmd == "dump") {
    std::string path;
    in >> path;
    std::ofstream out(path, std::ios::binary);
    for (const auto& t : tensors)
      out.write(reinterpret_cast<const char*>(t.bytes.data()),
                static_cast<std::streamsize>(t.bytes.size()));
    std::printf(out ? "dumped\n" : "error dump\n");
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  Peer p;
  p.tensors = parse_layout(args.layout);
  for (size_t i = 0; i < args.tiny_tensors; ++i) {
    TensorSpec t;
    char name[32];
    std::snprintf(name, sizeof name, "tiny%07zu", i);  // in sorted order: each add appends
    t.name = name;
    t.count = 1;
    t.bytes.assign(4, 0);
    p.tensors.push_back(std::move(t));
  }
  p.state = make_state(p.tensors);
  p.comm = connect(args);
  int64_t id = 0;
  lh_comm_get_attribute(p.comm, LH_ATTR_PEER_ID, &id);
  std::printf("ready id %lld\n", static_cast<long long>(id));
  std::fflush(stdout);

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "quit") break;
    if (!cmd.empty() && !comm_command(p, cmd, in) && !state_command(p, cmd, in))
      std::printf("error unknown-command %s\n", cmd.c_str());
    std::fflush(stdout);
  }
  if (p.background.joinable()) p.background.join();
  lh_comm_leave(p.comm, "done");
  lh_comm_destroy(p.comm);
  lh_state_destroy(p.spare);
  lh_state_destroy(p.state);
  std::fflush(stdout);
  return 0;
}
