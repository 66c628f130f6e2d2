// Hashing and copying bandwidth on one core, for bench/e2e/state: memcpy of a buffer, the state
// hash function over the same buffer block by block (XXH3, one thread), the parallel hashing a
// sync uses (on a runtime::WorkerPool sized to the machine, as a communicator's is), and the
// compressibility estimate. Prints one JSON line.
//
//   longhaul_state_micro [--mib N] [--repeats R]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/worker_pool.hpp"
#include "state/block_codec.hpp"
#include "state/block_hash.hpp"
#include "tool_cli.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double best_gbps(size_t bytes, int repeats, F&& f) {
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    f();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) * 8.0 / s / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int repeats = 5;
  CLI::App app{"Hashing and copying bandwidth on one core, for bench/e2e/state.\n",
               "longhaul_state_micro"};
  longhaul::cli::configure(app, "");
  longhaul::cli::add_number(app, "--mib", mib, 1, 1u << 20, "buffer size, MiB");
  longhaul::cli::add_number(app, "--repeats", repeats, 1, 1000,
                            "runs of each measurement (best taken)");
  if (auto exit_status = longhaul::cli::parse(app, argc, argv)) return *exit_status;
  namespace st = longhaul::state;
  const size_t bytes = mib << 20;
  std::vector<std::byte> src(bytes), dst(bytes);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t x = rng();
    std::memcpy(&src[i], &x, 8);
  }
  std::memset(dst.data(), 1, bytes);  // fault the pages in before timing

  volatile uint64_t sink = 0;
  const double memcpy_gbps =
      best_gbps(bytes, repeats, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  const double hash_gbps = best_gbps(bytes, repeats, [&] {
    uint64_t h = 0;
    for (uint64_t b = 0; b < st::block_count(bytes); ++b)
      h ^= st::hash_block(std::span(src).subspan(st::block_offset(b), st::block_length(bytes, b)));
    sink = h;
  });
  longhaul::runtime::WorkerPool workers;
  const double parallel_gbps =
      best_gbps(bytes, repeats, [&] { sink = st::hash_blocks(src, workers).back(); });
  const double estimate_gbps = best_gbps(bytes, repeats, [&] {
    size_t n = 0;
    for (uint64_t b = 0; b < st::block_count(bytes); ++b)
      n += st::estimate_compressible(
          std::span(src).subspan(st::block_offset(b), st::block_length(bytes, b)));
    sink = n;
  });
  (void)sink;
  const auto milli = [](double x) { return std::round(x * 1000) / 1000; };
  const nlohmann::ordered_json result = {
      {"bytes", bytes},
      {"memcpy_gbps", milli(memcpy_gbps)},
      {"hash_gbps", milli(hash_gbps)},
      {"hash_vs_memcpy", milli(hash_gbps / memcpy_gbps)},
      {"hash_parallel_gbps", milli(parallel_gbps)},
      {"threads", workers.parallelism()},
      {"estimate_gbps", milli(estimate_gbps)},
  };
  std::printf("%s\n", result.dump().c_str());
  return 0;
}
