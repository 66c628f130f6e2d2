// longhaul-gpu-bench: the GPU layer's own figures for bench/run gpu, each beside its reference
// measured in the same run, one JSON line per subcommand.
//
//   staging  the staging pipeline of an all-reduce of a --bytes CUDA tensor (every segment's copy
//            in, then every segment's copy back and the landing) beside plain cudaMemcpy to and
//            from pinned memory; and the copy in of segments that travel u8 and are only sent,
//            encoded on the device first, beside the plain copy in;
//   encode   the u8 and E3M0 kernels on --bytes of f32 beside a device-to-device cudaMemcpy of
//            the same bytes, and whether their bytes equal the CPU encoder's;
//   hash     shared state over a --bytes CUDA tensor: its block hashes taken on the device beside
//            copying it to pinned memory; lh_state_hash of it (hashed where it is) beside the
//            same bytes in host memory plus the copy the old path made; a shadow refresh of the
//            unchanged tensor beside that copy;
//   sync     a DiLoCo sync step of the sync engine (a group of one, H = 1: forming Δ, the outer
//            step, the merge) over --bytes of f32 parameters in device memory beside the same
//            parameters in host memory: what staging them through pinned memory costs.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <longhaul/longhaul.hpp>
#include <nlohmann/json.hpp>

#include "collective/allreduce_spec.hpp"
#include "collective/partition.hpp"
#include "gpu/codec_device.hpp"
#include "gpu/hash_device.hpp"
#include "gpu/staged_collectives.hpp"
#include "gpu/state_shadows.hpp"
#include "quant/codec.hpp"
#include "state/block_hash.hpp"

namespace {

using namespace longhaul;

[[noreturn]] void die(const std::string& what, const std::string& message) {
  std::fprintf(stderr, "longhaul-gpu-bench: %s: %s\n", what.c_str(), message.c_str());
  std::exit(1);
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(what, cudaGetErrorString(e));
}
void check(const Status& s, const char* what) {
  if (!s) die(what, s.message());
}

// Median seconds of `repeats` runs of `step`, after one untimed run.
double median_s(int repeats, const std::function<void()>& step) {
  step();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median of `repeats` runs of `timed`, each returning the seconds of the part it times, after
// one untimed run.
double median_of(int repeats, const std::function<double()>& timed) {
  (void)timed();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(timed());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double gbps(std::size_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds / 1e9;
}

nlohmann::ordered_json staging(std::size_t bytes, int repeats) {
  void* device = nullptr;
  check(cudaMalloc(&device, bytes), "cudaMalloc");
  check(cudaMemset(device, 1, bytes), "cudaMemset");
  void* pinned = nullptr;
  check(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");

  const double memcpy_down = median_s(repeats, [&] {
    check(cudaMemcpy(pinned, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  });
  const double memcpy_up = median_s(repeats, [&] {
    check(cudaMemcpy(device, pinned, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  });
  cudaFreeHost(pinned);

  // The all-reduce's own path, driven as an operation drives it: a pooled pinned slot, every
  // segment's copy in started at once and each one awaited, then every segment of the result
  // reported final and the landing awaited (in place, restore waived: segment by segment).
  collective::AllReduceSpec spec;
  const std::size_t count = bytes / sizeof(float);
  const collective::Partition part(count, 1, spec.segment_bytes / sizeof(float));
  const std::size_t order[] = {0};
  // `encoded`: the segments travel u8 and this member only sends them (a direct schedule's
  // contribution to another owner), so the engine encodes them on the device and copies the
  // encoding.
  const auto stage_as = [&](bool encoded) {
    spec = {};
    spec.input = device;
    spec.output = device;
    spec.count = count;
    spec.restore_input = false;
    auto staged = gpu::stage_device_buffers(spec, gpu::Memory::kAuto);
    if (!staged || !*staged || !spec.segment_staging)
      die("stage_device_buffers", staged ? "not staged" : staged.status().message());
    const collective::InputPlan input{.part = part,
                                      .chunk_order = order,
                                      .send_only_chunks = encoded
                                                              ? std::span<const std::size_t>(order)
                                                              : std::span<const std::size_t>(),
                                      .codec = encoded ? quant::Codec::kU8 : quant::Codec::kNone};
    spec.segment_staging->begin(input, {});  // no operation counts the copies here
    std::promise<void> all_in;
    std::atomic<std::size_t> left{part.segments()};
    for (std::size_t seg = 0; seg < part.segments(); ++seg)
      spec.segment_staging->when_input_ready(0, seg, [&](Status s) {
        check(s, "copy in");
        if (--left == 0) all_in.set_value();
      });
    all_in.get_future().wait();
  };
  const auto stage = [&] { stage_as(false); };
  const auto land = [&] {
    for (std::size_t seg = 0; seg < part.segments(); ++seg)
      spec.segment_staging->result_final(0, seg, {});
    check(spec.land_output(), "land_output");
  };
  const double staging_down = median_s(repeats, stage);
  const double staging_up = median_of(repeats, [&] {
    stage();
    const auto t0 = std::chrono::steady_clock::now();
    land();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  const double encoded_down = median_s(repeats, [&] { stage_as(true); });
  const std::size_t encoded_bytes = *quant::encoded_size(count, quant::Codec::kU8);
  spec = {};
  cudaFree(device);

  const double ratio = (memcpy_down + memcpy_up) / (staging_down + staging_up);
  return {{"bytes", bytes},
          {"staging_to_host_s", staging_down},
          {"staging_to_device_s", staging_up},
          {"memcpy_to_host_s", memcpy_down},
          {"memcpy_to_device_s", memcpy_up},
          {"staging_to_host_gbps", gbps(bytes, staging_down)},
          {"staging_to_device_gbps", gbps(bytes, staging_up)},
          {"memcpy_to_host_gbps", gbps(bytes, memcpy_down)},
          {"memcpy_to_device_gbps", gbps(bytes, memcpy_up)},
          {"staging_vs_pinned_memcpy", ratio},
          {"staging_u8_encoded_to_host_s", encoded_down},
          {"staging_u8_encoded_bytes", encoded_bytes},
          {"staging_u8_encoded_vs_plain_to_host", staging_down / encoded_down}};
}

nlohmann::ordered_json encode(std::size_t bytes, int repeats) {
  const std::size_t count = bytes / sizeof(float);
  std::vector<float> host(count);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : host) v = normal(rng);
  float* in = nullptr;
  float* copy = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&in), bytes), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&copy), bytes), "cudaMalloc");
  check(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice), "upload");

  nlohmann::ordered_json j = {{"bytes", bytes}};
  const double d2d = median_s(repeats, [&] {
    check(cudaMemcpy(copy, in, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // a device-to-device copy is async
  });
  j["d2d_copy_gbps"] = gbps(bytes, d2d);  // bytes copied per second (read once, written once)
  for (quant::Codec codec : {quant::Codec::kU8, quant::Codec::kE3M0}) {
    const std::string name(quant::codec_name(codec));
    const std::size_t encoded = *quant::encoded_size(count, codec);
    std::byte* out = nullptr;
    check(cudaMalloc(reinterpret_cast<void**>(&out), encoded), "cudaMalloc");
    const double t = median_s(
        repeats, [&] { check(gpu::encode_on_device(in, count, out, codec), "encode_on_device"); });
    std::vector<std::byte> got(encoded), want(encoded);
    check(cudaMemcpy(got.data(), out, encoded, cudaMemcpyDeviceToHost), "download");
    check(quant::encode(host, want, codec), "quant::encode");
    cudaFree(out);
    j["encode_" + name + "_gbps"] = gbps(bytes, t);  // f32 input bytes per second
    j["encode_" + name + "_vs_d2d_copy"] = d2d / t;
    j["encode_" + name + "_same_bytes_as_cpu"] = got == want;
  }
  cudaFree(copy);
  cudaFree(in);
  return j;
}

// Median seconds of lh_state_hash over one tensor of `bytes` at `data` (host or device memory).
double state_hash_s(void* data, std::size_t bytes, int repeats) {
  longhaul::State state;
  state.add("weights", data, bytes, LH_DTYPE_U8);
  return median_s(repeats, [&] { (void)state.hash(); });
}

nlohmann::ordered_json hashing(std::size_t bytes, int repeats) {
  std::vector<std::uint8_t> host(bytes);
  std::mt19937_64 rng(5);
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t r = rng();
    std::memcpy(host.data() + i, &r, 8);
  }
  void* device = nullptr;
  check(cudaMalloc(&device, bytes), "cudaMalloc");
  check(cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  void* pinned = nullptr;
  check(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  const double copy = median_s(repeats, [&] {
    check(cudaMemcpy(pinned, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  });
  cudaFreeHost(pinned);
  std::vector<std::uint64_t> hashes(state::block_count(bytes));
  const double on_device = median_s(repeats, [&] {
    check(gpu::hash_blocks_on_device(device, bytes, hashes), "hash_blocks_on_device");
  });
  const double state_device = state_hash_s(device, bytes, repeats);
  const double state_host = state_hash_s(host.data(), bytes, repeats);
  // A shadow refreshed from an unchanged tensor: after the first pull, only hashes cross PCIe.
  auto shadow = gpu::StateShadows::make(bytes);
  check(shadow.status(), "StateShadows::make");
  gpu::StateShadows shadows;
  shadows.keep(device, bytes, *shadow);
  const double refresh = median_s(repeats, [&] { check(shadows.pull(), "pull"); });
  const std::uint64_t pulled = shadows.bytes_pulled();
  cudaFree(device);
  nlohmann::ordered_json j;
  j["bytes"] = bytes;
  j["d2h_copy_s"] = copy;
  j["device_hash_s"] = on_device;
  j["device_hash_gbps"] = gbps(bytes, on_device);
  j["device_hash_vs_d2h_copy"] = copy / on_device;
  j["state_hash_device_s"] = state_device;
  j["state_hash_host_s"] = state_host;
  // Before: lh_state_hash copied the tensor to its shadow, then hashed it as host memory.
  j["state_hash_device_vs_copy_and_host_hash"] = (copy + state_host) / state_device;
  j["shadow_refresh_unchanged_s"] = refresh;
  j["shadow_refresh_vs_d2h_copy"] = copy / refresh;
  j["shadow_bytes_pulled"] = pulled;  // the first pull's, and none after
  return j;
}

// Median seconds of one sync step of a DiLoCo engine (a group of one, H = 1) over `parameters`.
double sync_step_s(longhaul::Communicator& comm, void* parameters, std::size_t count, int repeats) {
  longhaul::SyncEngineOptions o;
  o.ranges.push_back({parameters, count, LH_DTYPE_F32});
  o.c.sync_every = 1;
  longhaul::SyncEngine engine(comm, o);
  const double s = median_s(repeats, [&] { engine.step(); });
  engine.close();
  return s;
}

nlohmann::ordered_json sync_engine(std::size_t bytes, int repeats) {
  const std::size_t count = bytes / sizeof(float);
  longhaul::Master master(longhaul::MasterOptions{.listen_address = "127.0.0.1:0"});
  master.run();
  longhaul::Communicator comm(
      longhaul::CommunicatorOptions{.master_address = "127.0.0.1:" + std::to_string(master.port()),
                                    .listen_address = "127.0.0.1:0"});
  comm.connect();
  std::vector<float> host(count, 0.5f);
  void* device = nullptr;
  check(cudaMalloc(&device, bytes), "cudaMalloc");
  check(cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  const double on_host = sync_step_s(comm, host.data(), count, repeats);
  const double on_device = sync_step_s(comm, device, count, repeats);
  cudaFree(device);
  comm.leave("done");
  nlohmann::ordered_json j;
  j["bytes"] = bytes;
  j["sync_step_host_s"] = on_host;
  j["sync_step_device_s"] = on_device;
  j["sync_device_staging_s"] = on_device - on_host;
  j["sync_device_vs_host"] = on_host / on_device;
  // A sync reads the parameters (Δ) and writes them (the merge; with α = 0 it reads nothing).
  j["sync_staging_gbps"] = gbps(2 * bytes, on_device - on_host);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The GPU layer's figures for bench/run gpu (one JSON line)."};
  app.require_subcommand(1);
  app.fallthrough();  // --bytes and --repeats may follow the subcommand
  std::size_t bytes = std::size_t{1} << 30;
  int repeats = 5;
  app.add_option("--bytes", bytes, "tensor size (default 1 GiB)");
  app.add_option("--repeats", repeats, "timed runs (median)")->check(CLI::PositiveNumber);
  auto* stage = app.add_subcommand("staging", "staging of a CUDA tensor vs pinned cudaMemcpy");
  auto* enc = app.add_subcommand("encode", "u8/E3M0 kernels vs device-to-device copy");
  auto* sync = app.add_subcommand("sync", "a sync engine step over device vs host parameters");
  auto* hash = app.add_subcommand("hash", "shared-state hashing of a device tensor");
  CLI11_PARSE(app, argc, argv);
  check(gpu::cuda_available(), "CUDA");
  nlohmann::ordered_json j;
  try {
    j = stage->parsed()  ? staging(bytes, repeats)
        : sync->parsed() ? sync_engine(bytes, repeats)
        : hash->parsed() ? hashing(bytes, repeats)
                         : encode(bytes, repeats);
  } catch (const longhaul::Error& e) {
    die("longhaul", e.what());
  }
  std::printf("%s\n", j.dump().c_str());
  const bool differs = enc->parsed() && !(j["encode_u8_same_bytes_as_cpu"].get<bool>() &&
                                          j["encode_e3m0_same_bytes_as_cpu"].get<bool>());
  return differs ? 1 : 0;
}
