// A peer process for the all-reduce churn tests, written against the C API only.
//
//   allreduce_peer --master HOST:PORT --world N --steps S [--mib M] [--codec none|u8] [--batch]
//
// Connects, waits (update_topology loop) until its group has N members, then runs S steps. Step n
// all-reduces (f32 SUM, in place) M MiB whose values are a function of (n, this peer's id); with
// --batch it runs lh_allreduce_batch over four buffers (max_attempts 5) instead. Reports on stdout:
//   ready id <peer id> epoch <e> world <w>
//   begin step <n>                       (its input is filled; the all-reduce starts now)
//   step <n> epoch <e> world <w> hash <h> maxerr <err> ms <op ms>
//       (h: a 64-bit hash of the output, bit-identical on every member; err: the largest deviation
//        from the exact sum over the ring's members, computed locally)
//   fail step <n> status <LH_ERR_...> after_ms <ms since the op started> at_ms <unix ms>
//   input_intact <1|0>
//   retry step <n> epoch <e> world <w>   (after update_topology; the same step is retried)
//   abort status <LH_ERR_...> at_ms <unix ms>   (the abort callback: the master ended the group's ops)
//   error <what> <status> <message>      (then exits 3)
//   done
// A failed step is retried after lh_comm_update_topology. Stops after S successful steps or when
// stdin closes; exits 0.
#include <getopt.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "longhaul/longhaul.h"

namespace {

std::atomic<bool> g_stdin_closed{false};

[[noreturn]] void die(const char* what, lh_status s, const char* message) {
  std::printf("error %s %s %s\n", what, lh_status_string(s), message);
  std::fflush(stdout);
  std::_Exit(3);
}

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void on_abort(void*, uint64_t, lh_status status, const char*) {
  std::printf("abort status %s at_ms %lld\n", lh_status_string(status), static_cast<long long>(unix_ms()));
  std::fflush(stdout);
}

// Integers times 1/8 in [0, 127.875]: exactly representable, and sums of a few of them are exact in
// any order, so the expected result is known exactly.
float value(uint64_t step, uint64_t id, size_t i) {
  const uint64_t x = (static_cast<uint64_t>(i) * 2654435761u + step * 40503u + id * 9973u) % 1024u;
  return static_cast<float>(x) / 8.0f;
}

void fill(std::vector<float>& v, size_t offset, uint64_t step, uint64_t id) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(step, id, offset + i);
}

uint64_t hash_bytes(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

struct Args {
  std::string master, codec = "none";
  long world = 2, steps = 10;
  double mib = 16;
  bool batch = false;
};

void print_ready(lh_comm* comm, const char* what, long step) {
  int64_t epoch = 0, world = 0;
  lh_comm_get_attribute(comm, LH_ATTR_EPOCH, &epoch);
  lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
  std::printf("%s step %ld epoch %lld world %lld\n", what, step, static_cast<long long>(epoch),
              static_cast<long long>(world));
  std::fflush(stdout);
}

std::vector<uint64_t> ring_ids(lh_comm* comm) {
  std::vector<uint64_t> ids(64);
  size_t n = 0;
  if (lh_comm_get_ring(comm, ids.data(), ids.size(), &n) != LH_OK) die("lh_comm_get_ring", LH_ERR_INTERNAL, "");
  ids.resize(n);
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  static const option options[] = {{"master", required_argument, nullptr, 'm'},
                                   {"world", required_argument, nullptr, 'w'},
                                   {"steps", required_argument, nullptr, 's'},
                                   {"mib", required_argument, nullptr, 'b'},
                                   {"codec", required_argument, nullptr, 'c'},
                                   {"batch", no_argument, nullptr, 'B'},
                                   {nullptr, 0, nullptr, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "", options, nullptr)) != -1) {
    switch (opt) {
      case 'm': a.master = optarg; break;
      case 'w': a.world = std::atol(optarg); break;
      case 's': a.steps = std::atol(optarg); break;
      case 'b': a.mib = std::atof(optarg); break;
      case 'c': a.codec = optarg; break;
      case 'B': a.batch = true; break;
      default: return 2;
    }
  }
  if (a.master.empty() || a.world < 1 || a.steps < 0 || a.mib <= 0 || (a.codec != "none" && a.codec != "u8"))
    die("arguments", LH_ERR_INVALID_ARGUMENT, "see the header of allreduce_peer.cpp");

  std::thread([] {
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    g_stdin_closed = true;
  }).detach();

  lh_comm_options co;
  lh_comm_options_init(&co);
  co.master_address = a.master.c_str();
  co.listen_address = "127.0.0.1:0";
  co.connect_timeout_ms = 20000;
  lh_comm* comm = nullptr;
  if (lh_status s = lh_comm_create(&co, &comm); s != LH_OK) die("lh_comm_create", s, lh_last_error());
  lh_comm_set_abort_callback(comm, on_abort, nullptr);
  if (lh_status s = lh_comm_connect(comm); s != LH_OK) die("lh_comm_connect", s, lh_comm_last_error(comm));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int64_t size = 0;;) {
    if (lh_status s = lh_comm_update_topology(comm); s != LH_OK)
      die("lh_comm_update_topology", s, lh_comm_last_error(comm));
    lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &size);
    if (size >= a.world) break;
    if (std::chrono::steady_clock::now() > deadline || g_stdin_closed) die("waiting for the group", LH_ERR_TIMEOUT, "");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int64_t id = 0;
  lh_comm_get_attribute(comm, LH_ATTR_PEER_ID, &id);
  {
    int64_t epoch = 0, world = 0;
    lh_comm_get_attribute(comm, LH_ATTR_EPOCH, &epoch);
    lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
    std::printf("ready id %lld epoch %lld world %lld\n", static_cast<long long>(id), static_cast<long long>(epoch),
                static_cast<long long>(world));
    std::fflush(stdout);
  }

  const size_t total = static_cast<size_t>(a.mib * 1048576.0) / sizeof(float);
  // Four buffers of unequal sizes in batch mode, one otherwise; together `total` elements.
  std::vector<std::vector<float>> bufs;
  if (a.batch) {
    const size_t q = total / 8;
    bufs.resize(4);
    bufs[0].resize(q);
    bufs[1].resize(2 * q);
    bufs[2].resize(q + 1);
    bufs[3].resize(total - 4 * q - 1);
  } else {
    bufs.resize(1);
    bufs[0].resize(total);
  }
  std::vector<std::vector<float>> inputs(bufs.size());

  lh_allreduce_options ro;
  lh_allreduce_options_init(&ro);
  ro.codec = a.codec == "u8" ? LH_CODEC_U8 : LH_CODEC_NONE;
  const auto uid = static_cast<uint64_t>(id);

  for (long step = 0; step < a.steps && !g_stdin_closed;) {
    const auto ustep = static_cast<uint64_t>(step);
    size_t offset = 0;
    for (size_t b = 0; b < bufs.size(); ++b) {
      fill(bufs[b], offset, ustep, uid);
      inputs[b] = bufs[b];
      offset += bufs[b].size();
    }
    std::printf("begin step %ld\n", step);
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    lh_status s;
    if (a.batch) {
      std::vector<const void*> sends;
      std::vector<void*> recvs;
      std::vector<size_t> counts;
      for (auto& b : bufs) {
        sends.push_back(b.data());
        recvs.push_back(b.data());
        counts.push_back(b.size());
      }
      s = lh_allreduce_batch(comm, sends.data(), recvs.data(), counts.data(), bufs.size(), LH_DTYPE_F32, LH_OP_SUM,
                             &ro, 5);
    } else {
      s = lh_allreduce(comm, bufs[0].data(), bufs[0].data(), bufs[0].size(), LH_DTYPE_F32, LH_OP_SUM, &ro, nullptr);
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    if (s != LH_OK) {
      std::printf("fail step %ld status %s after_ms %lld at_ms %lld\n", step, lh_status_string(s),
                  static_cast<long long>(ms), static_cast<long long>(unix_ms()));
      bool intact = true;
      for (size_t b = 0; b < bufs.size(); ++b)
        intact = intact && std::memcmp(bufs[b].data(), inputs[b].data(), bufs[b].size() * sizeof(float)) == 0;
      std::printf("input_intact %d\n", intact ? 1 : 0);
      std::fflush(stdout);
      if (s != LH_ERR_PEER_LOST && s != LH_ERR_ABORTED) die("allreduce", s, lh_comm_last_error(comm));
      if (lh_status u = lh_comm_update_topology(comm); u != LH_OK)
        die("lh_comm_update_topology", u, lh_comm_last_error(comm));
      print_ready(comm, "retry", step);
      continue;
    }
    // The expected sum over the ring's members; exact for the plain encoding.
    const std::vector<uint64_t> ids = ring_ids(comm);
    double maxerr = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    offset = 0;
    for (const auto& b : bufs) {
      for (size_t i = 0; i < b.size(); ++i) {
        float expected = 0;
        for (uint64_t member : ids) expected += value(ustep, member, offset + i);
        maxerr = std::max(maxerr, std::fabs(static_cast<double>(b[i]) - static_cast<double>(expected)));
      }
      h = hash_bytes(h, b.data(), b.size() * sizeof(float));
      offset += b.size();
    }
    int64_t epoch = 0, world = 0;
    lh_comm_get_attribute(comm, LH_ATTR_EPOCH, &epoch);
    lh_comm_get_attribute(comm, LH_ATTR_GROUP_WORLD_SIZE, &world);
    std::printf("step %ld epoch %lld world %lld hash %016llx maxerr %g ms %lld\n", step,
                static_cast<long long>(epoch), static_cast<long long>(world), static_cast<unsigned long long>(h),
                maxerr, static_cast<long long>(ms));
    std::fflush(stdout);
    ++step;
  }
  std::printf("done\n");
  std::fflush(stdout);
  lh_comm_leave(comm, "allreduce_peer done");
  lh_comm_destroy(comm);
  return 0;
}
