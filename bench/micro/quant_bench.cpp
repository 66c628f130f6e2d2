// Encode / decode / decode+accumulate throughput of every codec, and the reduction kernels, beside
// memcpy of the same f32 bytes in the same run; and SPSA's shared randomness (issue 52, src/rng):
// Philox words, the perturbation's generation, perturb in place, and the one-byte code, on every
// ISA path this CPU runs.
//
// Throughput is counted in f32 input bytes (4 per element) for every benchmark, memcpy included,
// so bytes_per_second is directly comparable; the vs_memcpy counter is that rate divided by
// memcpy's rate for the same size (measured once per size at start-up, and also reported as the
// BM_Memcpy rows). One thread: the all-reduce parallelises over chunks.
//
//   cmake --preset release && cmake --build --preset release -j2 --target quant_bench
//   build/release/bench/micro/quant_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "common/cpu_isa.hpp"
#include "quant/codec.hpp"
#include "quant/error_report.hpp"
#include "quant/half.hpp"
#include "quant/reduce.hpp"
#include "quant/sparse_codec.hpp"
#include "rng/onebyte.hpp"
#include "rng/perturbation.hpp"

namespace lq = longhaul::quant;
namespace ls = longhaul::quant::sparse;
namespace lr = longhaul::rng;

namespace {

// Bytes per CPU second of memcpy of n floats: the best of 5 rounds of ~0.1 s of CPU time (CPU
// time, like the benchmarks' own rates, so a loaded machine skews both alike; best-of, so the
// ratios err low).
double memcpy_rate(std::size_t n) {
  static std::map<std::size_t, double> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<float> src(n, 1.0f);
  std::vector<float> dst(n, 0.0f);
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    const std::clock_t start = std::clock();
    std::size_t reps = 0;
    double elapsed = 0;
    do {
      std::memcpy(dst.data(), src.data(), n * sizeof(float));
      benchmark::ClobberMemory();
      ++reps;
      elapsed = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
    } while (elapsed < 0.1);
    best = std::max(best, static_cast<double>(reps * n * sizeof(float)) / elapsed);
  }
  cache[n] = best;
  return best;
}

void report(benchmark::State& state, std::size_t n) {
  const auto bytes = static_cast<double>(state.iterations()) * static_cast<double>(n) * 4.0;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["vs_memcpy"] =
      benchmark::Counter(bytes / memcpy_rate(n), benchmark::Counter::kIsRate);
}

std::vector<float> data(std::size_t n) {
  return lq::gaussian_with_outliers(n, 1e-4, 100.0f, 1);
}

void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> src = data(n);
  std::vector<float> dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  report(state, n);
}

void BM_Encode(benchmark::State& state) {
  const auto codec = static_cast<lq::Codec>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const std::vector<float> x = data(n);
  std::vector<std::byte> out(*lq::encoded_size(n, codec));
  state.SetLabel(std::string(lq::codec_name(codec)));
  for (auto _ : state) {
    if (!lq::encode(x, out, codec).is_ok()) state.SkipWithError("encode failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

void BM_Decode(benchmark::State& state) {
  const auto codec = static_cast<lq::Codec>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const std::vector<float> x = data(n);
  std::vector<std::byte> enc(*lq::encoded_size(n, codec));
  if (!lq::encode(x, enc, codec).is_ok()) state.SkipWithError("encode failed");
  std::vector<float> out(n);
  state.SetLabel(std::string(lq::codec_name(codec)));
  for (auto _ : state) {
    if (!lq::decode(enc, out, codec).is_ok()) state.SkipWithError("decode failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

void BM_DecodeAccumulate(benchmark::State& state) {
  const auto codec = static_cast<lq::Codec>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const std::vector<float> x = data(n);
  std::vector<std::byte> enc(*lq::encoded_size(n, codec));
  if (!lq::encode(x, enc, codec).is_ok()) state.SkipWithError("encode failed");
  std::vector<float> acc(n, 0.0f);
  state.SetLabel(std::string(lq::codec_name(codec)));
  for (auto _ : state) {
    if (!lq::decode_accumulate(enc, acc, codec).is_ok()) state.SkipWithError("decode failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

void BM_EncodeErrorFeedback(benchmark::State& state) {
  const auto codec = static_cast<lq::Codec>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const std::vector<float> x = data(n);
  std::vector<float> residual(n, 0.0f);
  std::vector<std::byte> out(*lq::encoded_size(n, codec));
  state.SetLabel(std::string(lq::codec_name(codec)));
  for (auto _ : state) {
    if (!lq::encode_with_error_feedback(x, residual, out, codec).is_ok()) {
      state.SkipWithError("encode failed");
    }
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// reduce_into (op: the third argument) in f32 element units: n f32, or 2n 16-bit elements (the
// same bytes).
void BM_Reduce(benchmark::State& state) {
  const auto dtype = static_cast<lq::DType>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const auto op = static_cast<lq::ReduceOp>(state.range(2));
  const std::size_t count = n * 4 / lq::element_size(dtype);
  std::vector<std::byte> dst(n * 4, std::byte{0});
  std::vector<std::byte> src(n * 4, std::byte{0});
  if (dtype == lq::DType::kF16 || dtype == lq::DType::kBF16) {  // 1.0 in both formats
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint16_t one = dtype == lq::DType::kF16 ? 0x3C00 : 0x3F80;
      std::memcpy(src.data() + 2 * i, &one, 2);
    }
  }
  state.SetLabel(std::string(lq::dtype_name(dtype)) + " " + std::string(lq::reduce_op_name(op)));
  for (auto _ : state) {
    if (!lq::reduce_into(dst.data(), src.data(), count, dtype, op).is_ok()) {
      state.SkipWithError("reduce failed");
    }
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// The all-reduce's combine of a 16-bit float sum (collective/allreduce.cpp): the output's values
// and one contribution summed in f32 and rounded back once. In f32 element units as above: n f32
// of bytes are 2n 16-bit elements. Variant 1 is sum_widened, what the combine calls; variant 0
// the three calls it fuses, over a 4096-element f32 accumulator (the combine until session 7),
// as the reference in the same run.
void BM_WidenedSum16(benchmark::State& state) {
  const auto dtype = static_cast<lq::DType>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const bool fused = state.range(2) != 0;
  const std::size_t count = n * 2;
  const std::uint16_t one = dtype == lq::DType::kF16 ? 0x3C00 : 0x3F80;
  const std::vector<std::uint16_t> src(count, one);
  std::vector<std::uint16_t> dst(count, one);
  constexpr std::size_t kPiece = 4096;
  std::vector<float> acc(kPiece);
  state.SetLabel(std::string(lq::dtype_name(dtype)) + (fused ? " sum_widened" : " three calls"));
  for (auto _ : state) {
    if (fused) {
      const void* sources[] = {src.data()};
      if (!lq::sum_widened(dst.data(), sources, count, dtype, 1).is_ok())
        state.SkipWithError("sum_widened failed");
    } else {
      for (std::size_t done = 0; done < count; done += kPiece) {
        const std::size_t k = std::min(kPiece, count - done);
        std::fill_n(acc.data(), k, -0.0f);
        bool ok = lq::accumulate_f32(acc.data(), dst.data() + done, k, dtype).is_ok();
        ok = ok && lq::accumulate_f32(acc.data(), src.data() + done, k, dtype).is_ok();
        ok = ok && lq::store_from_f32(dst.data() + done, acc.data(), k, dtype).is_ok();
        if (!ok) state.SkipWithError("widened sum failed");
      }
    }
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// The sparse codec (issue 48) at its defaults (chunk 4096, top 64, decay 0.95) on N(0, 1) data,
// where every chunk sends 64 entries (the most work and the most bytes). Encode carries the
// residual from one iteration to the next, as a peer does from round to round.
void BM_SparseEncode(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> x = lq::gaussian_with_outliers(n, 0, 0, 7);
  std::vector<float> residual(n, 0.0f);
  std::vector<std::byte> out(*ls::max_encoded_size(n, ls::Params{}));
  for (auto _ : state) {
    if (!ls::encode_with_error_feedback(x, residual, out, ls::Params{}).is_ok())
      state.SkipWithError("encode failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// Sink 0: decode (stores every element); 1: decode_accumulate (adds the sent ones).
void BM_SparseDecode(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> x = lq::gaussian_with_outliers(n, 0, 0, 7);
  std::vector<float> residual(n, 0.0f);
  std::vector<std::byte> enc(*ls::max_encoded_size(n, ls::Params{}));
  longhaul::Result<std::size_t> bytes = ls::encode_with_error_feedback(x, residual, enc, {});
  if (!bytes.is_ok()) state.SkipWithError("encode failed");
  enc.resize(bytes.is_ok() ? *bytes : 0);
  std::vector<float> out(n, 0.0f);
  state.SetLabel(state.range(1) == 0 ? "decode" : "decode_accumulate");
  for (auto _ : state) {
    const longhaul::Status s =
        state.range(1) == 0 ? ls::decode(enc, out) : ls::decode_accumulate(enc, out);
    if (!s.is_ok()) state.SkipWithError("decode failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// The share of a training step spent encoding the benchmark's DiLoCo fragment (1,058,400 f32,
// bench/e2e/diloco), whose steps take 0.1-0.3 s on the 2-vCPU VM; and the codec ratio.
void print_sparse_summary() {
  constexpr std::size_t kFragment = 1058400;
  const std::vector<float> x = lq::gaussian_with_outliers(kFragment, 0, 0, 7);
  std::vector<float> residual(kFragment, 0.0f);
  std::vector<std::byte> out(*ls::max_encoded_size(kFragment, ls::Params{}));
  double best = 1e9;
  std::size_t bytes = 0;
  for (int round = 0; round < 20; ++round) {
    const auto start = std::chrono::steady_clock::now();
    longhaul::Result<std::size_t> r = ls::encode_with_error_feedback(x, residual, out, {});
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (!r.is_ok()) return;
    bytes = *r;
    best = std::min(best, took.count());
  }
  std::printf(
      "sparse (chunk 4096, k 64): fragment of %zu f32 encodes in %.2f ms (best of 20) = %.2f%% of "
      "a 0.1 s step, %.2f%% of 0.3 s; sparse_codec_ratio %.2f (%zu bytes)\n",
      kFragment, best * 1e3, best / 0.1 * 100, best / 0.3 * 100,
      static_cast<double>(kFragment * sizeof(float)) / static_cast<double>(bytes), bytes);
}

constexpr std::int64_t kSmall = 1 << 18;   // 1 MiB of f32: a pipelined chunk, cache-resident
constexpr std::int64_t kLarge = 1 << 22;   // 16 MiB of f32: streams from L3/DRAM
constexpr std::int64_t kSparse = 1 << 20;  // 1M f32, the sparse codec's benchmark size

// ---- SPSA's shared randomness (src/rng) ------------------------------------------------------

// Runs the benchmark on ISA state.range(0) (longhaul::Isa), putting the process's selection back
// afterwards so the codec benchmarks keep theirs; false (the run skipped) where this CPU lacks it.
class IsaForBenchmark {
 public:
  explicit IsaForBenchmark(benchmark::State& state) {
    const auto isa = static_cast<longhaul::Isa>(state.range(0));
    longhaul::Result<longhaul::Isa> previous = longhaul::selected_isa();
    if (previous) previous_ = *previous;
    ok_ = longhaul::select_isa(isa).is_ok();
    if (!ok_) state.SkipWithError("this CPU cannot run this ISA's kernels");
    state.SetLabel(std::string(longhaul::isa_name(isa)));
  }
  ~IsaForBenchmark() { (void)longhaul::select_isa(previous_); }
  bool ok() const { return ok_; }

 private:
  longhaul::Isa previous_ = longhaul::Isa::kScalar;
  bool ok_ = false;
};

constexpr lr::StreamId kStream{2024, 7, 3, 1};

// z = +-1 written over n floats.
void BM_PerturbationFill(benchmark::State& state) {
  IsaForBenchmark isa(state);
  if (!isa.ok()) return;
  const auto n = static_cast<std::size_t>(state.range(1));
  std::vector<float> z(n);
  for (auto _ : state) {
    if (!lr::fill_perturbation(kStream, 0, z).is_ok()) state.SkipWithError("fill failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// theta += c z in place (read and write n floats), c alternating so theta stays put.
void BM_PerturbInPlace(benchmark::State& state) {
  IsaForBenchmark isa(state);
  if (!isa.ok()) return;
  const auto n = static_cast<std::size_t>(state.range(1));
  std::vector<float> theta = data(n);
  float c = 0x1p-10f;
  for (auto _ : state) {
    if (!lr::perturb(kStream, 0, theta, c).is_ok()) state.SkipWithError("perturb failed");
    c = -c;
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// The raw Philox4x32-10 words, n of them (4 bytes each, as the f32 rows).
void BM_PhiloxWords(benchmark::State& state) {
  IsaForBenchmark isa(state);
  if (!isa.ok()) return;
  const auto n = static_cast<std::size_t>(state.range(1));
  std::vector<std::uint32_t> words(n);
  const lr::PhiloxStream stream = lr::derive_stream(kStream);
  for (auto _ : state) {
    if (!lr::philox_words(stream, 0, words).is_ok()) state.SkipWithError("philox failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// The one-byte code of n projected gradients (scalar code built once: no ISA argument).
void BM_OneByte(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool encode = state.range(1) == 0;
  const std::vector<float> g = data(n);
  std::vector<std::int8_t> q(n);
  std::vector<float> back(n);
  const lr::OneByteScale scale = *lr::OneByteScale::start(-3);
  if (!lr::encode_projected_gradients(g, scale, q).is_ok()) state.SkipWithError("encode failed");
  state.SetLabel(encode ? "encode" : "decode");
  for (auto _ : state) {
    const longhaul::Status s = encode ? lr::encode_projected_gradients(g, scale, q)
                                      : lr::decode_projected_gradients(q, scale, back);
    if (!s.is_ok()) state.SkipWithError("one-byte code failed");
    benchmark::ClobberMemory();
  }
  report(state, n);
}

void isa_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t n : {kSmall, kLarge}) {
    for (const longhaul::Isa isa : longhaul::kAllIsas) b->Args({static_cast<int>(isa), n});
  }
}

void codec_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t n : {kSmall, kLarge}) {
    for (int c = 0; c < lq::kNumCodecs; ++c) b->Args({c, n});
  }
}

}  // namespace

BENCHMARK(BM_Memcpy)->Arg(kSmall)->Arg(kLarge)->Arg(kSparse);
BENCHMARK(BM_PerturbationFill)->Apply(isa_args);
BENCHMARK(BM_PerturbInPlace)->Apply(isa_args);
BENCHMARK(BM_PhiloxWords)->Apply(isa_args);
BENCHMARK(BM_OneByte)->Args({kSmall, 0})->Args({kSmall, 1});
BENCHMARK(BM_Encode)->Apply(codec_args);
BENCHMARK(BM_Decode)->Apply(codec_args);
BENCHMARK(BM_DecodeAccumulate)->Apply(codec_args);
BENCHMARK(BM_EncodeErrorFeedback)
    ->Args({static_cast<int>(lq::Codec::kU8), kSmall})
    ->Args({static_cast<int>(lq::Codec::kU4), kSmall})
    ->Args({static_cast<int>(lq::Codec::kE3M0), kSmall});
BENCHMARK(BM_SparseEncode)->Arg(kSparse);
BENCHMARK(BM_SparseDecode)->Args({kSparse, 0})->Args({kSparse, 1});
BENCHMARK(BM_Reduce)->Apply([](benchmark::internal::Benchmark* b) {
  const int sum = static_cast<int>(lq::ReduceOp::kSum), max = static_cast<int>(lq::ReduceOp::kMax);
  for (const lq::DType t : {lq::DType::kF32, lq::DType::kBF16, lq::DType::kF16, lq::DType::kI32})
    b->Args({static_cast<int>(t), kSmall, sum});
  b->Args({static_cast<int>(lq::DType::kBF16), kSmall, max});
  b->Args({static_cast<int>(lq::DType::kF16), kSmall, max});
});
BENCHMARK(BM_WidenedSum16)
    ->Args({static_cast<int>(lq::DType::kF16), kSmall, 0})
    ->Args({static_cast<int>(lq::DType::kF16), kSmall, 1})
    ->Args({static_cast<int>(lq::DType::kBF16), kSmall, 0})
    ->Args({static_cast<int>(lq::DType::kBF16), kSmall, 1});

int main(int argc, char** argv) {
  // The accuracy side of the trade, printed beside the speed.
  const std::vector<float> x = lq::gaussian_with_outliers(1 << 20, 1e-4, 100.0f, 2024);
  longhaul::Result<lq::QuantErrorReport> r = lq::quant_error_report(x);
  if (r.is_ok()) {
    std::printf(
        "relative L2 error (1M N(0,1), 0.01%% outliers of 100, block %zu): u8 %.5f, "
        "u4 %.5f, e3m0 %.5f, u8 chunk_minmax %.5f, u8/chunk %.4f\n",
        lq::kDefaultBlock, r->u8_blockwise, r->u4_blockwise, r->e3m0_blockwise, r->u8_chunk,
        r->ratio);
  }
  print_sparse_summary();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
