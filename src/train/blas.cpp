#include "train/blas.hpp"

#include "common/cpu_isa.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/log.hpp"

namespace longhaul::train {

namespace {

// CBLAS constants (cblas.h): row-major 101, no-transpose 111, transpose 112.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using SetThreadsFn = void (*)(int);
using CoreNameFn = char* (*)();

struct Blas {
  SgemmFn sgemm = nullptr;
  CoreNameFn corename = nullptr;
  Status status;
};

// OpenBLAS's kernel set for the ISA the process runs (common/cpu_isa.hpp), so that
// LONGHAUL_FORCE_ISA covers the matrix products too; null where the ISA is not usable (the
// kernels report that).
const char* core_for_selected_isa() {
  const Result<Isa> isa = selected_isa();
  if (!isa) return nullptr;
  switch (isa.value()) {
    case Isa::kAvx512:
      return "SkylakeX";
    case Isa::kAvx2:
      return "Haswell";
    case Isa::kScalar:
      return "Prescott";
  }
  return nullptr;
}

Blas load() {
  Blas b;
  if (const char* core = core_for_selected_isa();
      std::getenv("OPENBLAS_CORETYPE") == nullptr && core != nullptr) {
    setenv("OPENBLAS_CORETYPE", core, 0);
  }
  void* h = nullptr;
  for (const char* name : {LH_OPENBLAS_LIBRARY, "libopenblas.so.0", "libopenblas.so"}) {
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) break;
  }
  if (h == nullptr) {
    b.status = internal_error(std::string("cannot load OpenBLAS (") + LH_OPENBLAS_LIBRARY +
                              "): install libopenblas0");
    return b;
  }
  b.sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
  auto set_threads = reinterpret_cast<SetThreadsFn>(dlsym(h, "openblas_set_num_threads"));
  b.corename = reinterpret_cast<CoreNameFn>(dlsym(h, "openblas_get_corename"));
  if (b.sgemm == nullptr || set_threads == nullptr || b.corename == nullptr) {
    b.status = internal_error(
        "the loaded BLAS is not OpenBLAS (cblas_sgemm or "
        "openblas_set_num_threads missing)");
    return b;
  }
  set_threads(1);  // see the header: OpenMP owns the threads
  log::debug("train", "OpenBLAS kernels: {}", b.corename());
  return b;
}

const Blas& blas() {
  static const Blas b = load();  // thread-safe one-time initialisation
  return b;
}

}  // namespace

Status blas_init() {
  return blas().status;
}

std::string blas_core() {
  return blas().corename != nullptr ? blas().corename() : "none";
}

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  const Blas& b = blas();
  if (b.sgemm == nullptr) {
    std::fprintf(stderr, "longhaul train: %s\n", b.status.to_string().c_str());
    std::abort();
  }
  b.sgemm(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, M, N, K, alpha, A,
          lda, B, ldb, beta, C, ldc);
}

}  // namespace longhaul::train
